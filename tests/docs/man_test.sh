#!/usr/bin/env bash
# The man pages (docs/man/*.md, one source each; README.md points to softrnic(7)) agree with the
# code they document:
#   (a) every ia_params key the parsers accept (key == "..." in soft_rnic/params/ia_params.cpp and
#       netdev/src/config.cpp) is a documented key of softrnic.7.md's CONFIGURATION, and every
#       documented key is one they accept;
#   (b) every SOFTRNIC_* variable the code reads (getenv or an env_* helper, in dat/ soft_rnic/
#       netdev/ verbs/), and SOFTRNIC_LOG, is documented in ENVIRONMENT, and nothing there is stale;
#   (c) the pages generated in BUILD_DIR/docs/man exist, are not older than their sources, and
#       render with groff -man -Tutf8 -ww without a warning (sources in ASCII: groff reads Latin-1);
#   (d) every option softrnic_scenario and softrnic_bench declare (add_option/add_flag, or
#       a == "--x" in a hand-written parser) is in its page's OPTIONS, and back; every script
#       command of softrnic_scenario (cmd == "...") is in its SCRIPT FORMAT.
# A documented item is a definition-list term: a line starting with `name` or **name**, followed
# by a line starting with ":".
#   usage: man_test.sh SRC_DIR BUILD_DIR   (exit 77 = skipped: go-md2man or groff missing)
set -uo pipefail
src=${1:?usage: man_test.sh SRC_DIR BUILD_DIR}
build=${2:?usage: man_test.sh SRC_DIR BUILD_DIR}
command -v go-md2man >/dev/null || { echo "SKIPPED: go-md2man not installed (apt-get install go-md2man)"; exit 77; }
command -v groff >/dev/null || { echo "SKIPPED: groff not installed (apt-get install groff-base)"; exit 77; }
if grep -q '^GO_MD2MAN:FILEPATH=.*NOTFOUND' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "SKIPPED: $build was configured without go-md2man (no man pages there; reconfigure it)"
  exit 77
fi
man=$src/docs/man
status=0
fail() { echo "FAIL: $*"; status=1; }

# section FILE TITLE: the lines of the markdown section "# TITLE", up to the next "# " heading
section() { awk -v t="# $2" '/^# / { on = ($0 == t); next } on' "$1"; }
# terms: the names of the definition-list terms on stdin (`name`... or **name**... before ": ...")
terms() {
  awk '/^:/ && prev != "" { print prev } { prev = $0 }' |
    sed -nE 's/^`([^`]+)`.*/\1/p; s/^\*\*([^*]+)\*\*.*/\1/p'
}
# missing WANT HAVE: the lines of WANT that are not in HAVE (both sorted, one item a line)
missing() { comm -23 <(printf '%s\n' "$1" | sed '/^$/d') <(printf '%s\n' "$2" | sed '/^$/d'); }
count() { printf '%s\n' "$1" | sed '/^$/d' | wc -l; }
# agree TAG WANT HAVE WHAT_MISSING WHAT_STALE PASS: every item of WANT in HAVE and the reverse;
# a FAIL line for each side that is not ("TAG WHAT_MISSING: items"), else "PASS: TAG PASS"
agree() {
  local undocumented stale
  undocumented=$(missing "$2" "$3")
  stale=$(missing "$3" "$2")
  [[ -z $undocumented ]] || fail "$1 $4:" $undocumented
  [[ -z $stale ]] || fail "$1 $5:" $stale
  [[ -z $undocumented && -z $stale ]] && echo "PASS: $1 $6"
}

# ---- (a) ia_params keys ------------------------------------------------------------------------
parsers=("$src/soft_rnic/params/ia_params.cpp" "$src/netdev/src/config.cpp")
accepted=$(grep -ohE 'key == "[A-Za-z0-9_]+"' "${parsers[@]}" | sed 's/.*"\(.*\)"/\1/' | sort -u)
documented=$(section "$man/softrnic.7.md" CONFIGURATION | terms | sort -u)
[[ -n $accepted ]] || fail "(a) no key == \"...\" found in ${parsers[*]}"
echo "(a) ia_params keys: $(count "$accepted") accepted by the parsers, $(count "$documented") documented in softrnic.7.md"
agree "(a)" "$accepted" "$documented" "keys the parsers accept but softrnic.7.md does not document" \
  "keys softrnic.7.md documents but no parser accepts" "every accepted key is documented, every documented key is accepted"

# ---- (b) environment ---------------------------------------------------------------------------
code=$(find "$src/dat" "$src/soft_rnic" "$src/netdev" "$src/verbs" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \))
read_env=$(echo "$code" | xargs grep -ohE '(getenv|env_[a-z_]+) *\( *"SOFTRNIC_[A-Z0-9_]+"' |
             grep -oE 'SOFTRNIC_[A-Z0-9_]+' | sort -u)
fixed="SOFTRNIC_LOG"  # documented while the code that reads it is on its way
wanted=$(printf '%s\n' $read_env $fixed | sort -u)
env_doc=$(section "$man/softrnic.7.md" ENVIRONMENT | terms | sed 's/=.*//' | sort -u)
env_doc_softrnic=$(printf '%s\n' "$env_doc" | grep '^SOFTRNIC_' || true)
echo "(b) environment: $(count "$read_env") SOFTRNIC_* names read by the code ($(echo $read_env)), plus $fixed;" \
     "$(count "$env_doc") documented in ENVIRONMENT"
undocumented=$(missing "$wanted" "$env_doc")
[[ -z $undocumented ]] || fail "(b) variables not documented in softrnic.7.md's ENVIRONMENT:" $undocumented
stale=""
for v in $env_doc_softrnic; do
  [[ " $fixed " == *" $v "* ]] && continue
  echo "$code" | xargs grep -qF "\"$v\"" || stale+=" $v"
done
[[ -z $stale ]] || fail "(b) ENVIRONMENT documents variables no code names:$stale"
[[ -z $undocumented && -z $stale ]] && echo "PASS: (b) every variable read (and $fixed) is documented, none stale"

# ---- (c) generated pages -----------------------------------------------------------------------
pages=(softrnic.7 softrnic_info.1 softrnic_scenario.1 softrnic_bench.1)
ok=1
for p in "${pages[@]}"; do
  md=$man/$p.md
  out=$build/docs/man/$p
  nonascii=$(LC_ALL=C grep -nP '[^\x00-\x7F]' "$md" | head -3)
  [[ -z $nonascii ]] || { fail "(c) $md is not ASCII: $nonascii"; ok=0; }
  if [[ ! -f $out ]]; then
    fail "(c) $out was not generated (ninja -C $build softrnic_man)"
    ok=0
    continue
  fi
  [[ $out -nt $md || ! $md -nt $out ]] || { fail "(c) $out is older than $md (ninja -C $build softrnic_man)"; ok=0; }
  warnings=$(groff -man -Tutf8 -ww -z "$out" 2>&1)
  [[ -z $warnings ]] || { fail "(c) groff warns about $out: $warnings"; ok=0; }
  head -n 3 "$out" | grep -q '^\.TH ' || { fail "(c) $out has no .TH line at its top"; ok=0; }
done
echo "(c) pages: ${#pages[@]} generated in $build/docs/man, rendered with groff -man -Tutf8 -ww"
((ok)) && echo "PASS: (c) every page exists, is current, and renders without a warning"

# ---- (d) the tools' options --------------------------------------------------------------------
# options FILE: the option names a tool's source declares, one a line (positionals left out)
options() {
  {
    grep -ohE 'add_(option|flag)\( *"[^"]+"' "$1" | sed 's/.*"\(.*\)"/\1/' | tr ',' '\n'
    grep -ohE '[A-Za-z_]+ == "-[^"]*"' "$1" | sed 's/.*"\(.*\)"/\1/'
  } | grep '^-' | sort -u
}
for tool in info/softrnic_info scenario/softrnic_scenario bench/softrnic_bench; do
  name=${tool#*/}
  cpp=$src/tools/$tool.cpp
  md=$man/$name.1.md
  declared=$(options "$cpp")
  # CLI11 adds -h,--help of its own; softrnic_scenario declares them itself
  grep -q 'CLI::App' "$cpp" && declared=$(printf '%s\n' $declared -h --help | sort -u)
  doc=$(section "$md" OPTIONS | terms | grep '^-' | sort -u)
  # a term may name several: "**-h**, **--help**"
  doc=$(printf '%s\n' $doc $(section "$md" OPTIONS | grep -oE '^\*\*-[^*]+\*\*(, \*\*-[^*]+\*\*)+' |
          grep -oE '\*\*-[^*]+\*\*' | tr -d '*') | sort -u)
  echo "(d) $name: $(count "$declared") options declared ($(echo $declared)), $(count "$doc") documented"
  [[ -n $declared ]] || fail "(d) no options found in $cpp"
  agree "(d)" "$declared" "$doc" "$name options not in $md's OPTIONS" "$md documents options $name does not have" \
    "$name: every option documented, none stale"
done
cpp=$src/tools/scenario/softrnic_scenario.cpp
commands=$(grep -ohE 'cmd == "[a-z_]+"' "$cpp" | sed 's/.*"\(.*\)"/\1/' | sort -u)
doc=$(section "$man/softrnic_scenario.1.md" "SCRIPT FORMAT" | terms | sort -u)
echo "(d) softrnic_scenario script: $(count "$commands") commands in the runner, $(count "$doc") documented"
agree "(d)" "$commands" "$doc" "script commands not in softrnic_scenario.1.md's SCRIPT FORMAT" \
  "softrnic_scenario.1.md documents commands the runner does not have" "every script command documented, none stale"

((status == 0)) && echo "PASS: the man pages agree with the parsers and the tools"
exit $status
