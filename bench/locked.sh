#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Locked instructions per operation in each cell of a bench driver's --instr
# run (purgatory_bench, service_instr, wheel_bench): a measured count, not a
# reading of the code. x86-64 only. "Locked" means any instruction with the
# lock prefix (lock xadd, lock cmpxchg, lock add, lock or, ...) and xchg with
# a memory operand (implicitly locked). xchg between registers (the
# "xchg %ax,%ax" nop, valgrind's "xchg %rbx,%rbx" client-request marker)
# is not counted.
#
# Same run as bench/instr.sh: valgrind --tool=callgrind --collect-atstart=no,
# the driver switches collection on around each cell and dumps it as
# "LIBRARY/CELL", printing "instr LIBRARY CELL OPS". Here callgrind also gets
# --dump-instr=yes, so each dump gives the self cost (Ir = executions) of
# every instruction address, per ELF object (ob=). Each object the dumps name
# is disassembled with objdump -d (the executable, libc.so.6, ld.so, ...)
# and the executions of its locked instructions are summed per cell.
# Callgrind writes an instruction address relative to its object's load
# bias, i.e. as the ELF file's own virtual address (what objdump prints);
# this is checked, not assumed: every address with a cost must be the start
# of an instruction in objdump's listing (else the run fails), and where
# the dump's function name is a sized symbol of the file (nm), the address
# should lie inside it (a few do not: valgrind translates a superblock
# across a jump, e.g. from a .cold part back into its function, under the
# block's first function; over 5% outside fails the run: a wrong bias).
# The sum of the self costs read must equal each dump's summary.
# Callgrind's collection switch is per thread: the toggle counts only the
# thread that flips it (with --collect-atstart=no another thread's work is
# never counted; service_instr's expire-exec misses its executor's share).
#
# Output: a table, rows cells, columns per library: locked instructions per
# op and all instructions (Ir) per op. LOCKED_DETAIL=1 adds, per cell, each
# locked instruction executed: executions per op, object, function, address,
# disassembly.
#   locked.sh BENCH [N [CSV [MORE_BENCH...]]]
# BENCH, MORE_BENCH: a path, or a path and the driver's own arguments in one
# word split at spaces, as in instr.sh. CSV columns: library, cell, n, ops,
# locked, locked_per_op, ir, ir_per_op.
# Keep the dumps: LOCKED_KEEP=DIR (the files are copied there).
# LOCKED_MT=1: run the driver with an LD_PRELOAD object (compiled here with
# cc) whose constructor starts and joins one thread before main, so that
# glibc's __libc_single_threaded is false, as in any process that has ever
# had a second thread. glibc >= 2.34 takes pthread_mutex_lock/unlock (and
# malloc's arena locks) without any locked instruction while the process
# has never had a second thread; a single-threaded driver therefore counts
# 0 for every mutex, where a server with threads pays lock cmpxchg + xchg.
set -euo pipefail
bench=$1 n=${2:-100000} out=${3:-}
shift $(( $# < 3 ? $# : 3 ))
command -v valgrind >/dev/null || { echo "locked.sh: valgrind is not installed"; exit 1; }
command -v objdump >/dev/null || { echo "locked.sh: objdump is not installed (binutils)"; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "locked.sh: x86-64 only"; exit 1; }
for b in "$bench" "$@"; do
  read -ra cmd <<<"$b"
  [ -x "${cmd[0]}" ] || { echo "locked.sh: no ${cmd[0]}"; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
preload=()
if [ "${LOCKED_MT:-0}" != 0 ]; then
  printf '%s\n' '#include <pthread.h>' 'static void *none(void *a) { return a; }' \
    '__attribute__((constructor)) static void mt(void)' \
    '{ pthread_t t; if (!pthread_create(&t, 0, none, 0)) pthread_join(t, 0); }' >"$dir/mt.c"
  ${CC:-cc} -O2 -shared -fPIC -o "$dir/mt.so" "$dir/mt.c" -pthread ||
    { echo "locked.sh: cannot build the LOCKED_MT preload"; exit 1; }
  preload=(env "LD_PRELOAD=$dir/mt.so${LD_PRELOAD:+:$LD_PRELOAD}")
fi
start=$(date +%s)
k=0
for b in "$bench" "$@"; do
  k=$((k + 1))
  read -ra cmd <<<"$b"
  if ! "${preload[@]}" valgrind -q --tool=callgrind --collect-atstart=no --dump-instr=yes \
      --callgrind-out-file="$dir/cg$k.out" "${cmd[@]}" --instr --n "$n" >>"$dir/stdout" 2>>"$dir/stderr"; then
    cat "$dir/stdout" "$dir/stderr"
    echo "locked.sh: $b --instr failed"
    exit 1
  fi
done
grep -v '^instr ' "$dir/stdout" || true
cat "$dir/stderr"
if [ -n "${LOCKED_KEEP:-}" ]; then mkdir -p "$LOCKED_KEEP" && cp "$dir"/cg* "$dir/stdout" "$LOCKED_KEEP"/; fi
python3 - "$dir" "$n" "$out" "$(( $(date +%s) - start ))" "${LOCKED_DETAIL:-0}" "${LOCKED_MT:-0}" <<'PY'
import glob, os, re, subprocess, sys

dirname, n, out, secs, detail, mt = sys.argv[1:7]
mt = mt not in ("", "0")
detail = detail not in ("", "0")

def num(s):
    return int(s, 16) if s.startswith(("0x", "0X")) else int(s)

# ---- callgrind dumps: self cost per (object, address) ----
def parse_dump(path):
    """Returns name, summary Ir, {(obj, addr): Ir}, {(obj, addr): fn}.

    Follows callgrind's writer (callgrind/dump.c): a cost line's
    subpositions are absolute ("0x..."/decimal) or relative to the last
    cost line's ("+d", "-d", "*"); the lines of a calls=/jump=/jcnd=
    association (its target, and the source position line after it, with
    the call's inclusive cost for calls=) are written relative to that same
    last cost line and do not move it. ob=/cob= share one (ID) name table,
    fn=/cfn= another, fl=/fi=/fe=/cfi=/cfl= a third."""
    names = {"ob": {}, "fn": {}, "fl": {}}
    table = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "jfn": "fn",
             "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "jfi": "fl"}
    name = None; summary = None; totals = None
    positions = ["line"]; events = None
    obj = "???"; fn = "???"
    last = None            # last cost line's subpositions
    skip_next = False      # the line after calls=/jump=/jcnd=
    cost = {}; fnof = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            c = line[0]
            if skip_next:
                skip_next = False
                continue
            if c.isdigit() or c in "+-*":
                toks = line.split()
                np = len(positions)
                pos = []
                for i in range(np):
                    t = toks[i]
                    if t == "*":
                        v = last[i]
                    elif t[0] == "+":
                        v = last[i] + num(t[1:])
                    elif t[0] == "-":
                        v = last[i] - num(t[1:])
                    else:
                        v = num(t)
                    pos.append(v)
                last = pos
                ir = int(toks[np]) if len(toks) > np else 0
                if ir:
                    key = (obj, pos[0])
                    cost[key] = cost.get(key, 0) + ir
                    fnof[key] = fn
                continue
            if line.startswith(("calls=", "jump=", "jcnd=")):
                # target position: relative to last, last unchanged;
                # next line: the source position (+ inclusive cost), same.
                skip_next = True
                continue
            m = re.match(r"(\w+)=\s*(?:\((\d+)\))?\s*(.*)$", line)
            if m and m.group(1) in table:
                kind, ident, text = table[m.group(1)], m.group(2), m.group(3)
                if ident is not None:
                    if text:
                        names[kind][ident] = text
                    text = names[kind].get(ident, "(%s)" % ident)
                if m.group(1) == "ob":
                    obj = text
                elif m.group(1) == "fn":
                    fn = text
                continue
            if line.startswith("desc: Trigger: Client Request: "):
                name = line[len("desc: Trigger: Client Request: "):]
            elif line.startswith("positions:"):
                positions = line.split()[1:]
                assert positions and positions[0] == "instr", \
                    "%s: not dumped with --dump-instr=yes (positions: %s)" % (path, positions)
            elif line.startswith("events:"):
                events = line.split()[1:]
                assert events[0] == "Ir", "%s: first event is not Ir" % path
            elif line.startswith("summary:"):
                summary = int(line.split()[1])
            elif line.startswith("totals:"):
                totals = int(line.split()[1])
            elif line.startswith("part:"):
                last = None
    return name, (summary if summary is not None else totals), cost, fnof

# ---- objdump: instruction starts, locked instructions, symbols ----
insn_re = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
PREFIXES = {"lock", "rep", "repz", "repnz", "repe", "repne", "xacquire",
            "xrelease", "notrack", "bnd", "data16", "addr32", "cs", "ds",
            "ss", "es", "fs", "gs"}

def locked(text):
    toks = text.split()
    i = 0
    has_lock = False
    while i < len(toks) and toks[i] in PREFIXES:
        has_lock |= toks[i] == "lock"
        i += 1
    if has_lock:
        return True
    if i < len(toks) and re.fullmatch(r"xchg[bwlq]?", toks[i]):
        ops = " ".join(toks[i + 1:]).split("#")[0]
        # AT&T: a register operand is %reg; anything else (disp(%base),
        # (%reg), a bare address) is memory
        parts = re.split(r",(?![^(]*\))", ops.strip())
        return any(not p.strip().startswith("%") for p in parts if p.strip())
    return False

objcache = {}
def disasm(obj):
    if obj in objcache:
        return objcache[obj]
    info = None
    if os.path.isfile(obj):
        p = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", obj],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True)
        starts = set(); lk = {}
        for l in p.stdout.splitlines():
            m = insn_re.match(l)
            if m:
                t = m.group(2).strip()
                if t.startswith("(bad)"):
                    continue
                a = int(m.group(1), 16)
                starts.add(a)
                if locked(t):
                    lk[a] = " ".join(t.split("#")[0].split())
        syms = {}
        for dyn in ([], ["-D"]):
            q = subprocess.run(["nm", "-S", "--defined-only"] + dyn + [obj],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
            for l in q.stdout.splitlines():
                f = l.split()
                if len(f) == 4 and f[2] in "tTiWw" and int(f[1], 16) > 0:
                    syms.setdefault(base(f[3]), set()).add((int(f[0], 16), int(f[1], 16)))
        info = (starts, lk, syms)
    objcache[obj] = info
    return info

def base(s):
    s = s.split("'")[0]              # callgrind's "fn'2" recursion suffix
    return s.split("@")[0]

# ---- read every dump ----
dumps = {}
problems = []; notes = []
checked = {"addr": 0, "bad": 0, "sym": 0, "symbad": 0}
for path in sorted(glob.glob(os.path.join(dirname, "cg*.out.*"))):
    name, summary, cost, fnof = parse_dump(path)
    if name is None:
        continue
    total = sum(cost.values())
    if summary is not None and total != summary:
        problems.append("%s: self costs read sum to %d, summary says %d"
                        % (name, total, summary))
    nlock = 0; rows = {}
    for (obj, a), ir in cost.items():
        info = disasm(obj)
        if info is None:
            problems.append("%s: %d Ir in %s, which objdump cannot read"
                            % (name, ir, obj))
            continue
        starts, lk, syms = info
        checked["addr"] += 1
        if a not in starts:
            checked["bad"] += 1
            if checked["bad"] <= 5:
                problems.append("%s: %s %#x (fn %s) is not an instruction start"
                                % (name, obj, a, fnof[(obj, a)]))
        # where the dump's function is a symbol of the file (nm, with its
        # size), the address should lie inside it. Not always: valgrind
        # translates a superblock across a jump into another function (a
        # .cold part jumping back into its function), all of it under the
        # block's first function; so these only fail the run if many.
        fb = base(fnof[(obj, a)])
        if fb in syms:
            checked["sym"] += 1
            if not any(lo <= a < lo + sz for lo, sz in syms[fb]):
                checked["symbad"] += 1
                if checked["symbad"] <= 3:
                    notes.append("%s: %s %#x is under fn %s but outside that symbol"
                                 % (name, os.path.basename(obj), a, fnof[(obj, a)]))
        if a in lk:
            nlock += ir
            rows[(obj, a)] = (ir, fnof[(obj, a)], lk[a])
    dumps[name] = (nlock, total, rows)
# ---- the table ----
libs = []; cells = []; per = {}; missing = 0
for l in open(os.path.join(dirname, "stdout")):
    f = l.split()
    if len(f) != 4 or f[0] != "instr":
        continue
    lib, cell, ops = f[1], f[2], int(f[3])
    if lib not in libs: libs.append(lib)
    if cell not in cells: cells.append(cell)
    key = lib + "/" + cell
    if key not in dumps:
        missing += 1
        continue
    per[(lib, cell)] = (ops,) + dumps[key]

print("\nlocked instructions (lock prefix, xchg with memory) and all instructions (Ir)"
      " per operation (callgrind --dump-instr=yes), N = %s%s; - : no such cell"
      % (n, "; LOCKED_MT: glibc not single-threaded" if mt else
         "; glibc single-threaded until the driver starts a thread (its mutexes: no locked instruction till then; LOCKED_MT=1)"))
w = 22
print("  %-16s" % "cell" + "".join(" %*s" % (w, lib + " locked/op") + " %12s" % "Ir/op" for lib in libs))
for cell in cells:
    row = "  %-16s" % cell
    for lib in libs:
        if (lib, cell) in per:
            ops, nl, ir, _ = per[(lib, cell)]
            row += " %*.3f %12.1f" % (w, nl / ops, ir / ops)
        else:
            row += " %*s %12s" % (w, "-", "-")
    print(row)

if detail:
    for lib in libs:
        for cell in cells:
            if (lib, cell) not in per:
                continue
            ops, nl, ir, rows = per[(lib, cell)]
            print("\n%s/%s: %d locked in %d ops (%.3f/op)" % (lib, cell, nl, ops, nl / ops))
            for (obj, a), (cnt, fn, text) in sorted(rows.items(), key=lambda r: (-r[1][0], r[0])):
                print("  %10.3f/op %10d  %-14s %-40s %#8x  %s"
                      % (cnt / ops, cnt, os.path.basename(obj), fn[:40], a, text))

if out:
    with open(out, "w") as fo:
        fo.write("library,cell,n,ops,locked,locked_per_op,ir,ir_per_op\n")
        for lib in libs:
            for cell in cells:
                if (lib, cell) in per:
                    ops, nl, ir, _ = per[(lib, cell)]
                    fo.write("%s,%s,%s,%d,%d,%.4f,%d,%.2f\n"
                             % (lib, cell, n, ops, nl, nl / ops, ir, ir / ops))
    print("csv: %s" % out)

objs = sorted(o for o, v in objcache.items() if v is not None)
print("(checks: %d cost-bearing addresses in %d objects, %d not an instruction start; "
      "%d under a function named in nm, %d outside it; under callgrind: %s s)"
      % (checked["addr"], len(objs), checked["bad"], checked["sym"], checked["symbad"], secs))
if checked["symbad"] > 0.05 * max(checked["sym"], 1):
    problems.append("over 5% of the addresses lie outside their function's symbol: "
                    "wrong load bias?")
for p in notes:
    print("note: " + p)
for p in problems:
    print("locked.sh: " + p)
if missing:
    print("locked.sh: %d cells without a dump" % missing)
if not libs:
    print("locked.sh: no counts (was the driver built with <valgrind/callgrind.h>?)")
sys.exit(1 if problems or missing or not libs else 0)
PY
