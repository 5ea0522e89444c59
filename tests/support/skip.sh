#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A test that cannot run here: say why on a "skipped:" line (make test
# lists them after ctest's summary) and exit 77, ctest's skip. With
# TW_REQUIRE_ALL=1 (CI sets it) a skip is a failure instead: CI installs
# everything (make deps-all), so there nothing may be skipped.
#   skip.sh "NAME: why, and what to install"
echo "skipped: $*"
if [ "${TW_REQUIRE_ALL:-0}" = 1 ]; then
	echo "TW_REQUIRE_ALL=1: a skipped test fails"
	exit 1
fi
exit 77
