#!/usr/bin/env bash
# No include runs back up the floors (issue #26), and every header's guard
# names its path.
#
#   bash tests/check_includes.sh               # from the repository root: 0, or 1 and a line per violation
#   bash tests/check_includes.sh --table       # what each folder may include, as the floors below say
#   bash tests/check_includes.sh --markdown    # the floors as the table peer/README.md holds (checked equal)
#   bash tests/check_includes.sh --self-test   # plants bad includes in a temporary copy; the tree is not touched
#
# Every `#include "..."` in the tracked .c and .h files is resolved the way
# the compiler does (beside the including file, then from the root: -I.,
# then peer/lib: the examples are built against sgp.h alone) and the folder
# it lands in must be one the including folder may use:
#
#   peer/store/json.c:12: folder peer/store may not include folder peer/core
#
# The rule, as data: FLOORS lists the folders lowest first, one floor a line.
# A folder may include itself and the folders on lower floors. Folders that
# share a floor are independent: neither includes the other (net and sim are
# two drivers of one engine; store and sec are both used by what is above
# them). tests/ may include anything; nothing outside tests/ includes it. A
# folder's sub-folders belong to it (peer/lib/examples is peer/lib).
#
# A header listed in PRIVATE is its owner's alone (and tests'):
#
#   peer/net/node.c:9: peer/core/engine_state.h is private to peer/core/engine*.c (and tests/): ...
#
# A header's guard is its path in capitals, every other character an
# underscore (peer/core/round.h: PEER_CORE_ROUND_H), so two headers never
# share one; the installed peer/lib/sgp.h is SGP_H, the name it is installed
# under, and tests/fixtures holds copies of other releases' headers:
#
#   peer/core/round.h:1: header guard ROUND_H, not PEER_CORE_ROUND_H
set -u

FLOORS=(
    "nn compress topologies"
    "gossip"
    "peer/store peer/wire"
    "peer/core peer/config"
    "peer/net peer/sim"
    "peer/lib peer/launch"
    "peer/cmd"
)
FLOOR_WHAT=(
    "the numerics, the codecs, the graphs: no I/O, no clock"
    "push-sum / SGP and the pacing policy: pure"
    "files (checkpoints, model files, summaries, logs); the wire format, handshake, frames"
    "the peer engine; the cluster file, key files and this process's place in the cluster"
    "the two drivers of the engine: libuv, and the simulator's virtual clock"
    "libsgp; the launcher"
    "the CLI: one file per subcommand"
)
# The document that shows the floors, between these two lines, as --markdown
# writes them; check fails while it shows anything else.
FLOORS_DOC=peer/README.md
FLOORS_BEGIN="<!-- the floors: bash tests/check_includes.sh --markdown writes this table -->"
FLOORS_END="<!-- end of the floors -->"

ANYTHING="tests"

# Headers private to their owner (a file, or a glob of files): only it (and
# tests/) may include them. A module's state that everything else sees
# through its functions. Each entry: HEADER OWNER.
PRIVATE=(
    "peer/core/engine_state.h peer/core/engine*.c"
)

# Includes the floors forbid, allowed until the change that removes them
# lands. Each entry: FROM TO, under a comment that says why and what removes it.
TEMPORARY=(
)

die() {
    echo "check_includes: $*" >&2
    exit 2
}

declare -A FLOOR_OF=()
for i in "${!FLOORS[@]}"; do
    for f in ${FLOORS[$i]}; do
        FLOOR_OF[$f]=$i
    done
done
unset i f

# REPLY: the table folder a path belongs to (the longest folder that holds
# it), or "".
folder_of() {
    local path=$1 f
    REPLY=""
    for f in $ANYTHING "${!FLOOR_OF[@]}"; do
        if [[ $path == "$f"/* && ${#f} -gt ${#REPLY} ]]; then
            REPLY=$f
        fi
    done
}

# 0 when folder $1 may include folder $2.
may_include() {
    local from=$1 to=$2 t
    [[ $from == "$ANYTHING" || $from == "$to" ]] && return 0
    for t in "${TEMPORARY[@]}"; do
        [[ "$from $to" == "$t" ]] && return 0
    done
    [[ -n ${FLOOR_OF[$from]:-} && -n ${FLOOR_OF[$to]:-} ]] && ((FLOOR_OF[$to] < FLOOR_OF[$from]))
}

# REPLY: the path with a/b/../c as a/c and ./a as a; "" for one that leaves
# the root.
normalize() {
    local IFS=/ part
    local -a out=()
    REPLY=""
    for part in $1; do
        case $part in
        "" | .) ;;
        ..)
            ((${#out[@]})) || return 0
            unset 'out[${#out[@]}-1]'
            ;;
        *) out+=("$part") ;;
        esac
    done
    REPLY="${out[*]}"
}

# The tracked .c and .h files under the current directory (a temporary copy
# for --self-test is no repository: every .c and .h there).
source_files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [[ $(git rev-parse --show-prefix) == "" ]]; then
        git ls-files -- '*.c' '*.h'
    else
        find . -type f \( -name '*.c' -o -name '*.h' \) | sed 's|^\./||' | LC_ALL=C sort
    fi
}

# FILE<tab>LINE<tab>TARGET for each `#include "TARGET"` line of the files
# given (a line that starts with `#`: not one in a comment).
# shellcheck disable=SC2016 # $0 is awk's
includes() {
    local f
    for f in "$@"; do
        [[ -f $f ]] && printf '%s\0' "$f"
    done | xargs -0 awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
        s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
        printf "%s\t%d\t%s\n", FILENAME, FNR, s }'
}

# FILE:LINE for each header of the files given whose guard (its first
# #ifndef, followed by the #define of the same name) is not the one its path
# gives.
guards() {
    local f want
    for f in "$@"; do
        [[ $f == *.h && $f != tests/fixtures/* && -f $f ]] || continue
        want=$(tr 'a-z' 'A-Z' <<<"$f" | tr -c 'A-Z0-9\n' '_')
        [[ $f == peer/lib/sgp.h ]] && want=SGP_H
        awk -v want="$want" -v f="$f" '
            /^#ifndef / && !seen { seen = 1; name = $2; at = FNR; next }
            seen == 1 { ok = $0 == "#define " name; seen = 2 }
            END { if (!seen) printf "%s:1: no header guard (want %s)\n", f, want
                  else if (!ok) printf "%s:%d: no #define %s after its #ifndef\n", f, at, name
                  else if (name != want) printf "%s:%d: header guard %s, not %s\n", f, at, name, want }' "$f"
    done
}

# Prints one line per violation; returns 1 if there was any.
check() {
    local bad=0 file line target from to cand where
    local -a files=()
    mapfile -t files < <(source_files)
    ((${#files[@]})) || die "no .c or .h files under $PWD: run it from the repository root"
    while IFS=$'\t' read -r file line target; do
        [[ -n $file ]] || continue
        folder_of "$file"
        from=$REPLY
        if [[ -z $from ]]; then
            echo "$file:$line: folder ${file%/*} is in no floor (add it to FLOORS in tests/check_includes.sh)"
            bad=1
            continue
        fi
        where=""
        for cand in "${file%/*}/$target" "$target" "peer/lib/$target"; do
            normalize "$cand"
            if [[ -n $REPLY && -f $REPLY ]]; then
                where=$REPLY
                break
            fi
        done
        if [[ -z $where ]]; then
            echo "$file:$line: cannot find \"$target\""
            bad=1
            continue
        fi
        local p
        for p in "${PRIVATE[@]}"; do
            # shellcheck disable=SC2053 # the owner is a glob
            if [[ $where == "${p% *}" && $file != ${p#* } && $from != "$ANYTHING" ]]; then
                echo "$file:$line: $where is private to ${p#* } (and tests/): use its header's functions"
                bad=1
            fi
        done
        folder_of "$where"
        to=${REPLY:-${where%/*}}
        if ! may_include "$from" "$to"; then
            echo "$file:$line: folder $from may not include folder $to"
            bad=1
        fi
    done < <(includes "${files[@]}")
    local guard
    while IFS= read -r guard; do
        echo "$guard"
        bad=1
    done < <(guards "${files[@]}")
    floors_doc || bad=1
    return $bad
}

# The floors as a markdown table, highest first (as a reader looks down).
markdown() {
    local i f cells
    echo "| floor | folders | what |"
    echo "|-------|---------|------|"
    for ((i = ${#FLOORS[@]} - 1; i >= 0; i--)); do
        cells=""
        for f in ${FLOORS[$i]}; do
            cells+="\`$f/\` "
        done
        echo "| $i | ${cells% } | ${FLOOR_WHAT[$i]} |"
    done
}

# The table FLOORS_DOC holds between its markers, if it differs from --markdown's.
floors_doc() {
    [[ -f $FLOORS_DOC ]] || return 0
    local shown
    shown=$(awk -v b="$FLOORS_BEGIN" -v e="$FLOORS_END" '$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$FLOORS_DOC")
    if [[ $shown != "$(markdown)" ]]; then
        echo "$FLOORS_DOC: its table of the floors is not the one tests/check_includes.sh --markdown writes"
        return 1
    fi
}

table() {
    local i f g j allowed t
    for i in "${!FLOORS[@]}"; do
        for f in ${FLOORS[$i]}; do
            allowed=""
            for ((j = 0; j < i; j++)); do
                allowed+=" ${FLOORS[$j]}"
            done
            for t in "${TEMPORARY[@]}"; do
                g=${t#* }
                [[ ${t%% *} == "$f" ]] && allowed+=" $g(temporary)"
            done
            printf '%-12s may include: %s\n' "$f" "${allowed# }"
        done
    done
    printf '%-12s may include: anything\n' "$ANYTHING"
}

# Plants one line at the end of FILE in the copy, checks that exactly the
# expected output line (or none) appears beside the baseline, takes it out.
self_test() {
    local root rc=0 before after
    root=$(pwd)
    [[ -f tests/check_includes.sh ]] || die "--self-test runs from the repository root"
    before=$(git status --porcelain 2>/dev/null; git diff 2>/dev/null | cksum)
    SELF_TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/check_includes.XXXXXX") || die "mktemp failed"
    trap 'rm -rf "$SELF_TEST_TMP"' EXIT
    source_files | while IFS= read -r f; do
        [[ -f $f ]] || continue
        mkdir -p "$SELF_TEST_TMP/${f%/*}" && cp "$f" "$SELF_TEST_TMP/$f"
    done
    cd "$SELF_TEST_TMP" || die "cannot enter $SELF_TEST_TMP"
    local baseline
    baseline=$(check)
    plant() { # FILE LINE-TO-ADD EXPECTED (with @ for FILE:LINE, "" for none)
        local file=$1 add=$2 want=$3 got n saved
        [[ -f $file ]] || { echo "self-test: $file is not in the tree any more: pick another"; rc=1; return; }
        saved=$(cat "$file"; echo x)
        printf '%s\n' "$add" >>"$file"
        n=$(wc -l <"$file")
        want=${want//@/$file:$n}
        got=$(diff <(echo "$baseline") <(check) | sed -n 's/^> //p')
        printf '%s' "${saved%x}" >"$file"
        if [[ "$got" == "$want" ]]; then
            echo "ok   ${add} in $file -> ${want:-(nothing to report)}"
        else
            echo "FAIL ${add} in $file: expected '${want:-nothing}', got '${got:-nothing}'"
            rc=1
        fi
    }
    plant peer/store/json.c '#include "peer/core/round.h"' '@: folder peer/store may not include folder peer/core'
    plant peer/store/summary.c '#include "../core/clock.h"' '@: folder peer/store may not include folder peer/core'
    plant peer/sim/sim_queue.c '#include "peer/net/net.h"' '@: folder peer/sim may not include folder peer/net'
    plant nn/nn_model.c '#  include   "peer/cmd/cli.h"' '@: folder nn may not include folder peer/cmd'
    plant gossip/gsp.c '#include "tests/sgp_run.h"' '@: folder gossip may not include folder tests'
    plant peer/core/clock.c '#include "no/such/header.h"' '@: cannot find "no/such/header.h"'
    plant peer/core/clock.c '#include "gossip/gsp.h"' ''
    plant peer/cmd/main.c '#include "peer/launch/launch.h"' ''
    plant peer/net/node.c '#include "peer/core/engine_state.h"' \
        '@: peer/core/engine_state.h is private to peer/core/engine*.c (and tests/): use its header'"'"'s functions'
    plant peer/core/round.c '#include "peer/core/engine_state.h"' \
        '@: peer/core/engine_state.h is private to peer/core/engine*.c (and tests/): use its header'"'"'s functions'
    plant tests/unit/test_peer_store.c '#include "peer/cmd/cli.h"' ''
    plant peer/store/json.c ' *   #include "peer/cmd/cli.h"   (a comment)' ''
    local got
    sed -i 's/PEER_CORE_ROUND_H/ROUND_H/g' peer/core/round.h
    got=$(diff <(echo "$baseline") <(check) | sed -n 's/^> //p')
    sed -i 's/\bROUND_H\b/PEER_CORE_ROUND_H/g' peer/core/round.h
    if [[ $got == "peer/core/round.h:"*": header guard ROUND_H, not PEER_CORE_ROUND_H" ]]; then
        echo "ok   guard ROUND_H in peer/core/round.h -> $got"
    else
        echo "FAIL guard ROUND_H in peer/core/round.h: got '${got:-nothing}'"
        rc=1
    fi
    printf '%s\n| a table of other floors |\n%s\n' "$FLOORS_BEGIN" "$FLOORS_END" >"$FLOORS_DOC"
    got=$(diff <(echo "$baseline") <(check) | sed -n 's/^> //p')
    rm "$FLOORS_DOC"
    if [[ $got == "$FLOORS_DOC: its table of the floors is not the one tests/check_includes.sh --markdown writes" ]]; then
        echo "ok   another table in $FLOORS_DOC -> $got"
    else
        echo "FAIL another table in $FLOORS_DOC: got '${got:-nothing}'"
        rc=1
    fi
    cd "$root" || die "cannot return to $root"
    after=$(git status --porcelain 2>/dev/null; git diff 2>/dev/null | cksum)
    if [[ "$before" != "$after" ]]; then
        echo "FAIL the self-test changed the tree"
        rc=1
    fi
    ((rc == 0)) && echo "check_includes self-test: ok" || echo "check_includes self-test: FAILED"
    return $rc
}

if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [[ -n $(git rev-parse --show-prefix) ]]; then
    die "run it from the repository root"
fi
case "${1:-}" in
"") check ;;
--table) table ;;
--markdown) markdown ;;
--self-test) self_test ;;
*) die "usage: bash tests/check_includes.sh [--table | --markdown | --self-test]" ;;
esac
