#!/usr/bin/env bash
# Checks that the usage sketches in the headers' comments compile against
# the real headers, so that a sketch cannot drift from the API it shows.
#
#   bash tests/check_sketches.sh              every tracked header (tests/fixtures aside)
#   bash tests/check_sketches.sh FILE.h ...   only these headers
#   bash tests/check_sketches.sh --show FILE.h   print the C made of FILE.h's sketches
#   bash tests/check_sketches.sh --self-test  plant broken sketches in a scratch repository
#                                             and check that each one is reported
#
# Run from anywhere inside the repository. Prints the compiler's errors, at
# the header's own lines (peer/core/engine.h:14:5: error: ...), and exits 1
# when a sketch does not compile, 0 when all do, 2 on a usage error. Needs
# bash, perl, git and $CC (cc); the packages' flags come from pkg-config.
#
# What a sketch is. In a header's comment, a run of lines indented by three
# spaces or more after the ` *` is a sketch, unless it continues the line
# above it: a `- ` list item or a display (a hanging indent). A display that
# is not C (a formula, a table of options) is indented by two spaces. The
# sketches of one comment are, in order, the body of one function, so a
# later one may use what an earlier one declared; a function's definition, a
# `static` declaration and a line that starts with `#` go at file scope.
# The header itself is included first.
#
# Sketches are C, with `...` for what they leave out:
#   ... any words ...       prose: an elided statement, up to the next `...`
#                           (it may span lines): `... send msgs ...`
#   if (rc < 0) ...         a lone `...`: an empty statement
#   {.id = 3, ..., .x = 1}  `, ...` in a list: the rest of an initializer
# `//` comments are comments. `...` never stands for arguments: a call is
# written whole, so the compiler checks it.
#
# The variables a sketch uses without declaring them (its givens) are
# declared in tests/sketch_givens.c, under a line `//@ path/of/header.h`;
# what comes before the first such line is given to every sketch. A section
# for a header that has no sketch is reported.
set -euo pipefail

GIVENS=tests/sketch_givens.c

self_test() {
    local self tmp out out2 rc fail=0
    self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    mkdir -p "$tmp/tests" "$tmp/lib"
    cat > "$tmp/lib/demo.h" <<'EOF'
/* A demo API. Its good sketch, with every kind of elision:
 *
 *   demo d;
 *   if (demo_init(&d, n, err, sizeof err) < 0) ...   // "FILE: why", ...
 *   demo_opts o = {.n = 3, ..., .z = 1};
 *   for (;;) {
 *       ... compute, then
 *           send ...
 *       if (demo_step(&d) == 1) break;
 *   }
 *
 * Prose between two sketches of one comment; the second uses d:
 *
 *   demo_free(&d);
 *
 * A display that is not C:
 *
 *  x -= lr * g
 *
 * - a list item with a hanging
 *   indent, not C either
 */
#ifndef LIB_DEMO_H
#define LIB_DEMO_H
#include <stddef.h>
typedef struct demo { int n; } demo;
typedef struct demo_opts { int n, y, z; } demo_opts;
int demo_init(demo *d, int n, char *err, size_t cap);
int demo_step(demo *d);
void demo_free(demo *d);

/* A callback, at file scope:
 *
 *   static void on_done(void *ctx) { (void)ctx; }
 *   demo_watch(on_done, NULL);
 */
void demo_watch(void (*cb)(void *), void *ctx);
#endif
EOF
    printf 'char err[64];\n//@ lib/demo.h\nextern int n;\n' > "$tmp/tests/sketch_givens.c"
    out="$(cd "$tmp" && git init -q && bash "$self" 2>&1)" && rc=0 || rc=$?
    [ "$rc" = 0 ] || { echo "self-test: exit status $rc on good sketches, want 0:"; echo "$out"; fail=1; }
    # The faults: a function that does not exist, a wrong argument, an
    # undeclared variable, an elision left open, a section for no sketch.
    perl -0pi -e 's/demo_step\(&d\)/demo_stepp(&d)/; s/demo_free\(&d\)/demo_free(d)/;
                  s/demo_watch\(on_done, NULL\)/demo_watch(on_done, ctx)/;
                  s/send \.\.\.\n/send\n/' "$tmp/lib/demo.h"
    printf '//@ lib/gone.h\nextern int m;\n' >> "$tmp/tests/sketch_givens.c"
    out="$(cd "$tmp" && bash "$self" 2>&1)" && rc=0 || rc=$?
    local want=(
        'lib/demo.h:7:.*not closed'  'lib/demo.h:14:.*demo_free'  'lib/demo.h:35:.*ctx'
        'tests/sketch_givens.c:4: .*lib/gone.h'
    )
    [ "$rc" = 1 ] || { echo "self-test: exit status $rc with planted faults, want 1"; fail=1; }
    for w in "${want[@]}"; do
        grep -q -- "^$w" <<<"$out" || { echo "self-test: not reported: $w"; fail=1; }
    done
    perl -0pi -e 's/send\n/send ...\n/' "$tmp/lib/demo.h"
    out2="$(cd "$tmp" && bash "$self" 2>&1)" || true
    grep -q '^lib/demo.h:9:.*demo_stepp' <<<"$out2" || { echo "self-test: not reported: lib/demo.h:9: demo_stepp"; fail=1; }
    if [ "$fail" = 0 ]; then echo "check_sketches self-test: ok"; else
        echo "--- the check's output with the planted faults was:"; echo "$out"; fi
    return "$fail"
}

show=0
case "${1:-}" in
    --self-test) self_test; exit ;;
    --show) show=1; shift; [ $# = 1 ] || { echo "usage: $0 --show FILE.h" >&2; exit 2; } ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: $0 [--self-test | --show FILE.h | FILE.h ...]" >&2; exit 2 ;;
esac

# The repository root: git's, or this script's parent folder in a copy without .git.
root="$(git rev-parse --show-toplevel 2>/dev/null)" || root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$(git rev-parse --show-prefix 2>/dev/null || true)"
headers=()
subset=0
for h in "$@"; do headers+=("$prefix$h"); subset=1; done
cd "$root"
if [ ${#headers[@]} = 0 ]; then
    mapfile -t headers < <(git ls-files -co --exclude-standard '*.h' 2>/dev/null | grep -v '^tests/fixtures/' ||
                           find . -name '*.h' ! -path './build/*' ! -path './tests/fixtures/*' | sed 's|^\./||')
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Write one translation unit per header with sketches: $tmp/N.c, and its
# header in $tmp/N.h_name. Problems found here (an elision left open, a
# givens section for no sketch) are printed; the exit status says if any.
rc=0
perl - "$tmp" "$GIVENS" "$show" "$subset" "${headers[@]}" <<'PERL' || rc=$?
use strict;
use warnings;
my ($tmp, $givens, $show, $subset, @headers) = @ARGV;
my $bad = 0;

# The givens: a preamble and a section per header, each line with its number.
my (@pre, %sect, %sect_line);
if (open my $g, '<', $givens) {
    my $cur = \@pre;
    while (my $l = <$g>) {
        if ($l =~ m{^//@\s*(\S+)}) { $sect{$1} = []; $sect_line{$1} = $.; $cur = $sect{$1}; next; }
        push @$cur, [$., $l];
    }
}

# One line of a sketch as C: prose elisions out, strings and // comments kept.
# $$prose says whether a `... prose` is open (carried from the line before).
sub as_c {
    my ($s, $prose) = @_;
    my $out = '';
    while (length $s) {
        if ($$prose) {
            if ($s =~ s/^.*?\.\.\.//) { $$prose = 0; next; }
            last;
        }
        if ($s =~ s{^("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')}{}) { $out .= $1; next; }
        if ($s =~ m{^//}) { $out .= $s; last; }
        if ($s =~ s/^,\s*\.\.\.(?=\s*[,)}\]])//) { next; }                         # {a, ...}
        if ($out =~ /[{,]\s*$/ && $s =~ s/^\.\.\.\s*,\s*//) { next; }             # {a, ..., b}
        if ($s =~ s/^\.\.\.(?=\s+[^\s,;)}\]\/])//) { $out .= ';'; $$prose = 1; next; }  # ... words ...
        if ($s =~ s/^\.\.\.//) { $out .= ';'; next; }                               # a lone ...
        $s =~ s/^([^"'\/.,]+|.)//s;
        $out .= $1;
    }
    return $out;
}

my ($n, $n_sketches) = (0, 0);
my %has_sketch;
for my $h (@headers) {
    open my $f, '<', $h or do { print "$h: cannot read\n"; $bad = 1; next; };
    my @lines = <$f>;
    close $f;
    my ($in_comment, $comment, $prev_item) = (0, 0, 0);
    my (@blocks, $cur);
    for my $i (0 .. $#lines) {
        my $l = $lines[$i];
        if (!$in_comment) {
            $cur = undef;
            # a comment opening on this line (and not closing on it)
            if ($l =~ m{/\*} && $l !~ m{/\*.*\*/}) { $in_comment = 1; $comment++; $prev_item = 0; }
            next;
        }
        my $closes = $l =~ m{\*/};
        if ($l =~ m{^\s*\*( {3,}\S.*?)\s*(?:\*/)?\s*$} && !$prev_item) {
            my $text = $1;
            if (!$cur) { $cur = {comment => $comment, lines => []}; push @blocks, $cur; }
            push @{$cur->{lines}}, [$i + 1, substr($text, 3)];
        } else {
            $cur = undef;
            # a `- ` list item or a display: the indented lines under it are its own
            if ($l =~ m{^\s*\*(?:\s+- |  \S)}) { $prev_item = 1; }
            elsif ($l !~ m{^\s*\* {3,}\S}) { $prev_item = 0; }
        }
        $in_comment = 0 if $closes;
    }
    next unless @blocks;
    $has_sketch{$h} = 1;
    $n++;
    $n_sketches += @blocks;
    my ($top, $body, $fn) = ('', '', 0);
    my $last_comment = -1;
    for my $b (@blocks) {
        if ($b->{comment} != $last_comment) {
            $body .= "}\n" if $last_comment >= 0;
            $body .= "int usage_sketch_at_line_$b->{lines}[0][0](void)\n{\n";
            $last_comment = $b->{comment};
        }
        # $depth: braces open in this sketch; $at_top: in a function
        # definition that started at depth 0.
        my ($prose, $opened, $depth, $at_top) = (0, 0, 0, 0);
        for my $ln (@{$b->{lines}}) {
            my ($no, $text) = @$ln;
            my $was_prose = $prose;
            my $c = as_c($text, \$prose);
            $opened = $no if $prose && !$was_prose;
            $at_top = 1 if $depth == 0 && $c =~ /^(?:static\s|[A-Za-z_][\w\s*]*\b\w+\s*\([^;]*\)\s*\{)/;
            (my $code = $c) =~ s{"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|//.*}{}g;
            $depth += () = $code =~ /\{/g;
            $depth -= () = $code =~ /\}/g;
            my $out = "#line $no \"$h\"\n$c\n";
            if ($at_top || $c =~ /^\s*#/) { $top .= $out; } else { $body .= $out; }
            $at_top = 0 if $depth <= 0;
        }
        if ($prose) {
            print "$h:$opened: an elision `... words` is not closed by `...` in its sketch\n";
            $bad = 1;
        }
    }
    $body .= "}\n" if $last_comment >= 0;
    my $tu = "#include \"$h\"\n";
    for my $part (\@pre, $sect{$h} || []) {
        $tu .= "#line $_->[0] \"$givens\"\n$_->[1]" for @$part;
    }
    $tu .= $top . $body;
    if ($show) { print $tu; next; }
    open my $o, '>', "$tmp/$n.c" or die;
    print $o $tu;
    close $o;
    open $o, '>', "$tmp/$n.h_name" or die;
    print $o $h;
    close $o;
}
if (!$show && !$subset) {
    for my $h (sort { $sect_line{$a} <=> $sect_line{$b} } keys %sect) {
        next if $has_sketch{$h};
        print "$givens:$sect_line{$h}: a section for $h, which has no sketch\n";
        $bad = 1;
    }
}
if (!$show) { open my $o, '>', "$tmp/count" or die; print $o "$n_sketches\n"; close $o; }
exit $bad;
PERL
[ "$show" = 1 ] && exit "$rc"

# Compile them, two at a time: the build's language, defines and include
# paths, every -Wall warning an error but the unused-variable ones (a sketch
# declares what it shows, and may not use it).
msgpack=msgpack; pkg-config --exists msgpack-c 2>/dev/null && msgpack=msgpack-c
pkg="$(pkg-config --cflags openblas $msgpack libuv libsodium zlib 2>/dev/null || true)"
export SKETCH_CC="${CC:-cc}" SKETCH_FLAGS="-std=c17 -fsyntax-only -D_GNU_SOURCE -I. $pkg -Wall -Werror -Wno-unused"
count=0
for tu in "$tmp"/*.c; do [ -e "$tu" ] && count=$((count + 1)); done
if [ "$count" -gt 0 ]; then
    printf '%s\n' "$tmp"/*.c | xargs -P 2 -I{} sh -c \
        'h=$(cat "${1%.c}.h_name"); $SKETCH_CC $SKETCH_FLAGS -iquote "$(dirname "$h")" "$1" > "${1%.c}.out" 2>&1 || echo "$h" > "${1%.c}.failed"' sh {}
fi
failed=0
for tu in $(ls "$tmp"/*.c 2>/dev/null | sort -V); do
    if [ -e "${tu%.c}.failed" ]; then
        failed=$((failed + 1))
        grep -v "^In file included from\|^ *from " "${tu%.c}.out" || true
    fi
done
if [ "$failed" -gt 0 ] || [ "$rc" != 0 ]; then
    echo "check_sketches: the sketches of $failed of $count headers do not compile, and $((rc != 0)) other problem(s) above" \
         "(the convention: bash tests/check_sketches.sh --help)"
    exit 1
fi
echo "check_sketches: $(cat "$tmp/count") sketch(es) in $count header(s) compile"
