#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every public function's comment must say what it returns (@return or
# @retval, unless it returns void) and from which threads it may be called
# ("@par Thread safety"). Doxygen checks the parameters; this checks the rest.
# tw__* names are the headers' own inline helpers, not the API.
#   check-api-docs.sh include/timingwheel/*.h
set -euo pipefail
perl -e '
  my $bad = 0; my $n = 0;
  for my $file (@ARGV) {
    open my $fh, "<", $file or die "$file: $!";
    my ($doc, $in_doc, $last_doc_end, $lineno) = ("", 0, -1, 0);
    while (my $line = <$fh>) {
      $lineno++;
      if ($line =~ m{^\s*/\*\*}) { $in_doc = 1; $doc = ""; }
      if ($in_doc) {
        $doc .= $line;
        if ($line =~ m{\*/}) { $in_doc = 0; $last_doc_end = $lineno; }
        next;
      }
      next unless $line =~ /^(?:static inline )?([a-z][\w ]*?[\s*]+)(tw_[a-z0-9]\w*)\(/;
      my ($type, $name) = ($1, $2);
      next if $line =~ /^typedef/;
      $n++;
      my @missing;
      push @missing, "a doc comment right above" if $last_doc_end != $lineno - 1;
      push @missing, "\@par Thread safety" unless $doc =~ /\@par Thread safety\n/;
      push @missing, "\@return or \@retval"
        unless $type =~ /^void\s*$/ || $doc =~ /\@(return|retval)/;
      if (@missing) { print "$file:$lineno: $name lacks ", join(", ", @missing), "\n"; $bad++; }
    }
  }
  print "check-api-docs: $n public functions, $bad incomplete\n";
  exit($bad ? 1 : 0);
' "$@"
