#!/usr/bin/env bash
# Checks that the documentation names only things that exist.
#
#   bash tests/check_docs.sh              check every *.md of this repository
#   bash tests/check_docs.sh --self-test  plant bad references in a scratch repository
#                                         and check that each one is reported
#
# Run from anywhere inside the repository; it checks the whole work tree
# (git ls-files: tracked files, and untracked ones git does not ignore, so a
# new document is checked before it is added; in a copy without .git, every
# file but the build outputs). Needs bash, perl and git. Each problem is one line
# `file:line: message`; the exit status is 1 when there is any, 0 when there is
# none, 2 on a usage error. It reads files and changes nothing.
#
# What it checks, in every *.md except test fixtures and fuzz corpora:
#
# (a) Repository paths. A markdown link's target must exist relative to the
#     document's folder (as GitHub resolves it). An inline code span of one
#     word that looks like a path (it has a `/`, or ends in .c .h .md .sh .py
#     .topo .map .in) must exist relative to the repository root or to the
#     document's folder; a bare file name (`sgp.h`) may be any tracked file of
#     that name; a path whose first folder is neither at the root nor beside
#     the document (`run/cluster.conf`) is taken for an example. In prose,
#     in code blocks and in code spans of several words (commands), only words
#     that start with a top-level entry of the repository (`peer/...`,
#     `tests/...`) are taken as paths, relative to the root; prose is also
#     checked for bare `NAME.md` names. `*` and `?` match as in a shell glob.
#     Not paths: URLs, `build/...` (outputs), absolute paths, `~` and `$VAR`
#     paths, words starting with `-` (`--flag=a/b`), `name:arg` specs
#     (`mlp:256`), and placeholders: a path with an upper-case word as a
#     folder or file stem (`RUN/model.safetensors`, `FILE.topo`) unless it is
#     a `.md` name.
# (b) Test names. `suite/test_name` (Criterion's filter syntax, `*` allowed)
#     whose suite has an underscore must match some `Test(suite, test_name`
#     in tests/*.c. In prose only suites that exist are looked at; in code
#     spans and code blocks an unknown suite is reported too.
# (c) The protocol version. The number peer/wire/WIRE.md states as its version
#     (in its title, "..., version N", or else on a line of its own such as
#     "Version: N") and every "version u16 = N" of its handshake table must
#     equal every constant named *PROTOCOL_VERSION, *WIRE_VERSION or
#     *SEC_VERSION in the repository's headers outside tests/ (`#define NAME
#     N`, or `NAME = N` in an enum or a const), because the handshake sends
#     that constant and refuses any other. A constant defined as another name
#     (`#define SEC_VERSION WIRE_VERSION`) is followed to its number. Several
#     such constants may exist while the code moves to one: each is compared.
# (d) Comments in the code. In every .c and .h file, what a C comment names
#     as in prose (a path that starts with a top-level entry, a test whose
#     suite exists) must exist: a header that points at a file that moved
#     says something untrue.
set -euo pipefail

self_test() {
    local self tmp out rc fail=0
    self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    mkdir -p "$tmp/tests" "$tmp/peer/net" "$tmp/peer/sec" "$tmp/doc"
    printf 'Test(demo_suite, passes) {}\nTest(demo_suite, passes_too)\n{}\n' > "$tmp/tests/test_demo.c"
    printf '#define WIRE_VERSION 4\n' > "$tmp/peer/net/wire.h"
    printf '#define SEC_VERSION 3\n' > "$tmp/peer/sec/sec.h"
    printf '# wire format, version 4\n\n| 1 | magic, version u16 = 4 |\n' > "$tmp/peer/net/WIRE.md"
    cat > "$tmp/README.md" <<'EOF'
# good references, none reported

`peer/net/wire.h`, [the format](peer/net/WIRE.md), `wire.h`, `net/WIRE.md`,
tests `demo_suite/passes`, `demo_suite/*`, `tests/*.c`, `build/sgp`,
`run/cluster.conf`, `--flag=a/b`, `mlp:256`, `RUN/model.safetensors`,
`FILE.topo`, https://example.org/a/b.md, `x / w`.

```
bash tests/test_demo.c --filter 'demo_suite/passes_too' > my.topo
```
EOF
    cat > "$tmp/doc/bad.md" <<'EOF'
# planted problems, each reported

A path that is not there: `peer/net/missing.c`.
A link: [sparse](../FORMAT-sparse.md), a bare name: see DESIGN.md.
A test that is not there: `demo_suite/no_such_test`, and a suite: `no_suite/a_test`.
In prose, peer/sec/gone.h and demo_suite/gone_* are not there either.

    bash tests/bench/gone.sh
EOF
    printf '/* What peer/net/wire.h says,\n * and peer/net/gone.c does */\nint x; // demo_suite/no_test_here\n' > "$tmp/peer/net/bad.c"
    out="$(cd "$tmp" && git init -q && bash "$self" 2>&1)" && rc=0 || rc=$?
    local want=(
        'doc/bad.md:3: '   'doc/bad.md:4: .*FORMAT-sparse.md'  'doc/bad.md:4: .*DESIGN.md'
        'doc/bad.md:5: .*demo_suite/no_such_test'  'doc/bad.md:5: .*no_suite/a_test'
        'doc/bad.md:6: .*peer/sec/gone.h'  'doc/bad.md:6: .*demo_suite/gone_\*'
        'doc/bad.md:8: .*tests/bench/gone.sh'  'peer/sec/sec.h:1: SEC_VERSION is 3'
        'peer/net/bad.c:2: .*peer/net/gone.c'  'peer/net/bad.c:3: .*demo_suite/no_test_here'
    )
    [ "$rc" = 1 ] || { echo "self-test: exit status $rc with planted problems, want 1"; fail=1; }
    for w in "${want[@]}"; do
        grep -q -- "^$w" <<<"$out" || { echo "self-test: not reported: $w"; fail=1; }
    done
    if grep -q '^README.md:\|^peer/net/bad.c:1:' <<<"$out"; then
        echo "self-test: a good reference was reported:"; grep '^README.md:' <<<"$out"; fail=1
    fi
    rm "$tmp/doc/bad.md" "$tmp/peer/net/bad.c"
    printf '#define SEC_VERSION WIRE_VERSION\n' > "$tmp/peer/sec/sec.h"
    out="$(cd "$tmp" && bash "$self" 2>&1)" && rc=0 || rc=$?
    [ "$rc" = 0 ] || { echo "self-test: exit status $rc once fixed, want 0:"; echo "$out"; fail=1; }
    if [ "$fail" = 0 ]; then echo "check_docs self-test: ok"; else
        echo "--- the check's output with the planted problems was:"; echo "$out"; fi
    return "$fail"
}

case "${1:-}" in
    --self-test) self_test; exit ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    '') ;;
    *) echo "usage: $0 [--self-test]" >&2; exit 2 ;;
esac

# The repository root: git's, or this script's parent folder in a copy without .git.
root="$(git rev-parse --show-toplevel 2>/dev/null)" || root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

exec perl -e '
use strict;
use warnings;
$| = 1;

# The tree: what git tracks or would track; without git, every file but the
# build outputs that .gitignore names.
my $list = `git ls-files -co --exclude-standard 2>/dev/null`;
if ($? != 0) {
    $list = `find . -type f ! -path "./.git/*" ! -path "./build/*" ! -path "./peer/python/build/*" ! -path "*/__pycache__/*" ! -path "*.egg-info/*" ! -name "*.tmp"`;
    die "check_docs: cannot list the files\n" if $?;
    $list =~ s{^\./}{}mg;
}
my @tree = grep { length } split /\n/, $list;
my (%file, %dir, %base, %top);
for my $f (@tree) {
    $file{$f} = 1;
    my ($b) = $f =~ m{([^/]+)$};
    push @{$base{$b}}, $f;
    my ($t) = $f =~ m{^([^/]+)};
    $top{$t} = 1;
    my $d = $f;
    $dir{$d} = 1 while $d =~ s{/[^/]*$}{};
}
my @entries = (@tree, keys %dir);

my @problems;
my ($n_paths, $n_tests) = (0, 0);
sub problem { push @problems, "$_[0]:$_[1]: $_[2]"; }

sub slurp {
    my ($f) = @_;
    open my $fh, "<", $f or return undef;
    local $/;
    my $s = <$fh>;
    return $s;
}

# Collapse "." and ".."; undef when the path leaves the repository.
sub normal {
    my ($p) = @_;
    my @out;
    for my $c (split m{/+}, $p) {
        next if $c eq "" || $c eq ".";
        if ($c eq "..") { return undef unless @out; pop @out; next; }
        push @out, $c;
    }
    return join "/", @out;
}

sub glob_re {
    my ($g) = @_;
    my $re = join "", map { $_ eq "*" ? "[^/]*" : $_ eq "?" ? "[^/]" : quotemeta } split /([*?])/, $g;
    return qr/^$re$/;
}

sub present {
    my ($p) = @_;
    return 0 unless defined $p;
    return 1 if $p eq "";
    if ($p =~ /[*?]/) { my $re = glob_re($p); return scalar grep { $_ =~ $re } @entries; }
    return $file{$p} || $dir{$p};
}

sub in_dir { my ($d, $p) = @_; return normal($d eq "" ? $p : "$d/$p"); }

# Criterion tests: suite -> [names].
my %tests;
for my $f (grep { m{^tests/(?:unit/|process/)?[^/]+\.c$} } @tree) {
    my $s = slurp($f) // next;
    while ($s =~ /\b(?:Test|ParameterizedTest|Theory)\s*\(\s*(\w+)\s*,\s*(\w+)/g) { push @{$tests{$1}}, $2; }
}

sub test_ok {
    my ($suite, $name) = @_;
    my $re = glob_re($name);
    return scalar grep { $_ =~ $re } @{$tests{$suite}};
}

# A placeholder, not a path: an upper-case folder or file stem (RUN/x, FILE.topo),
# unless it names a document (DESIGN.md must be checked).
sub placeholder {
    my ($p) = @_;
    return 0 if $p =~ /\.md$/;
    for my $c (split m{/}, $p) { (my $stem = $c) =~ s/\..*//; return 1 if $stem =~ /^[A-Z][A-Z0-9_]*$/; }
    return 0;
}

sub clean_token {
    my ($t) = @_;
    $t =~ s/^[("\x27]+//;
    $t =~ s/[)"\x27.,;:!?]+$//;
    $t =~ s/:\d+(?::\d+)?$//;        # file.c:123
    $t =~ s/#.*$//;
    return $t;
}

my $TEST_RE = qr{^([a-z][a-z0-9]*_[a-z0-9_]*)/([A-Za-z0-9_*?]+)$};
my $EXT_RE  = qr{\.(?:c|h|md|sh|py|topo|map|in)$};

# A word inside prose, a code block or a command: a path only if it starts at
# a top-level entry; a test name if its suite exists (or, in code, has the shape).
sub check_word {
    my ($md, $ln, $t, $in_code) = @_;
    $t = clean_token($t);
    return if $t eq "" || $t =~ /^-/ || $t =~ m{://};
    if ($t =~ $TEST_RE && !$top{$1}) {
        my ($s, $n) = ($1, $2);
        $n_tests++;
        if ($tests{$s}) { problem($md, $ln, "no test $t in tests/{unit,process}/*.c") unless test_ok($s, $n); }
        elsif ($in_code && $s =~ /_/ && $n =~ /_|\*/) { problem($md, $ln, "no test suite $s in tests/{unit,process}/*.c (named in $t)"); }
        return;
    }
    return unless $t =~ m{^[A-Za-z0-9_.][A-Za-z0-9_.+*?/-]*$} && $t =~ m{/};
    my ($first) = $t =~ m{^([^/]+)};
    return unless $top{$first};
    return if $first eq "build";
    $n_paths++;
    problem($md, $ln, "no such path: $t") unless present(normal($t));
}

# A code span of one word: judged more loosely, as it is meant to be read as a name.
sub check_span_word {
    my ($md, $mddir, $ln, $t) = @_;
    $t = clean_token($t);
    return if $t eq "" || $t =~ /^[-\/~\$]/ || $t =~ m{://} || $t =~ m{^build/};
    if ($t =~ $TEST_RE && !$top{$1} && !present(in_dir($mddir, $1))) { check_word($md, $ln, $t, 1); return; }
    return unless $t =~ m{^[A-Za-z0-9_.][A-Za-z0-9_.+*?/-]*$};
    return unless $t =~ m{/} || $t =~ $EXT_RE;
    return if $t =~ /^\.\w+$/;                      # an extension: `.topo`
    $n_paths++;
    return if present(normal($t)) || present(in_dir($mddir, $t));
    if ($t =~ m{/}) {
        # Only a path that starts where ours do; run/cluster.conf is an example.
        my ($first) = (normal($t) // "") =~ m{^([^/]+)};
        return unless defined $first;
        my ($first_here) = (in_dir($mddir, $t) // "") =~ m{^(?:\Q$mddir\E/)?([^/]+)};
        return unless $top{$first} || (defined $first_here && present(in_dir($mddir, $first_here)));
    } else {
        my $re = glob_re($t);
        return if $base{$t} || ($t =~ /[*?]/ && grep { (m{([^/]+)$})[0] =~ $re } @tree);
    }
    return if placeholder($t);
    problem($md, $ln, "no such path: $t");
}

sub check_link {
    my ($md, $mddir, $ln, $target) = @_;
    return if $target =~ m{^[A-Za-z][A-Za-z0-9+.-]*:} || $target =~ /^#/ || $target eq "";
    $target =~ s/[#?].*$//;
    $target =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    my $p = $target =~ s{^/}{} ? normal($target) : in_dir($mddir, $target);
    $n_paths++;
    problem($md, $ln, "broken link: $target") unless present($p);
}

# Prose: links, code spans, then the rest word by word.
sub check_prose {
    my ($md, $mddir, $start, $text) = @_;
    my $line_at = sub { my ($pos) = @_; return $start + (() = substr($text, 0, $pos) =~ /\n/g); };
    my $rest = $text;
    while ($text =~ /(`+)(.+?)(?<!`)\1(?!`)/gs) {
        my ($span, $pos) = ($2, $-[0]);
        my $ln = $line_at->($pos);
        substr($rest, $pos, $+[0] - $pos) = " " x ($+[0] - $pos);
        $span =~ s/^\s+|\s+$//g;
        my @words = split /\s+/, $span;
        if (@words == 1) { check_span_word($md, $mddir, $ln, $words[0]); }
        else { check_word($md, $ln, $_, 1) for map { split /[=,;|<>()\[\]{}]+/ } @words; }
    }
    my $r2 = $rest;
    while ($rest =~ /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g) {
        check_link($md, $mddir, $line_at->($-[0]), $1);
        substr($r2, $-[1], $+[1] - $-[1]) = " " x ($+[1] - $-[1]);
    }
    while ($rest =~ /^\s*\[[^\]]+\]:\s*(\S+)/mg) {
        check_link($md, $mddir, $line_at->($-[1]), $1);
        substr($r2, $-[1], $+[1] - $-[1]) = " " x ($+[1] - $-[1]);
    }
    $r2 =~ s{\b[A-Za-z][A-Za-z0-9+.-]*://\S+}{" " x length $&}ge;
    while ($r2 =~ /(\S+)/g) {
        my ($w, $pos) = ($1, $-[1]);
        my $ln = $line_at->($pos);
        $w =~ s/^\*+//;                  # **bold** and *italic*; a glob keeps its own *
        $w =~ s/\*{2,}[.,;:)]*$//;
        for my $part (split /[=,;|<>()\[\]{}]+/, $w) { check_word($md, $ln, $part, 0); }
        my $c = clean_token($w);
        if ($c =~ m{^([A-Za-z0-9_.-]+\.md)$} && !$base{$1} && !present(in_dir($mddir, $1))) {
            problem($md, $ln, "no such document: $1");
        }
    }
}

for my $md (sort grep { /\.md$/ && !m{^tests/fixtures/} && !m{^tests/fuzz/corpus/} } @tree) {
    my $s = slurp($md) // next;
    my ($mddir) = $md =~ m{^(.*)/[^/]*$};
    $mddir //= "";
    my @lines = split /\n/, $s, -1;
    my ($fence, $indented, $prev_blank) = (undef, 0, 1);
    my ($para, $para_start) = ("", 0);
    my $flush = sub { check_prose($md, $mddir, $para_start, $para) if $para =~ /\S/; $para = ""; };
    for my $i (0 .. $#lines) {
        my ($l, $ln) = ($lines[$i], $i + 1);
        if (defined $fence) {
            if ($l =~ /^\s{0,3}(\Q$fence\E+)\s*$/) { $fence = undef; next; }
            check_word($md, $ln, $_, 1) for split /[\s=,;|<>()\[\]{}]+/, $l;
            next;
        }
        if ($l =~ /^\s{0,3}(```+|~~~+)/) { $flush->(); $fence = substr($1, 0, 3); $prev_blank = 0; next; }
        if (($indented || ($prev_blank && $para eq "")) && $l =~ /^(?: {4}|\t)/) {
            $indented = 1;
            check_word($md, $ln, $_, 1) for split /[\s=,;|<>()\[\]{}]+/, $l;
            next;
        }
        $indented = 0 if $l =~ /\S/;
        if ($l !~ /\S/) { $flush->(); $prev_blank = 1; next; }
        $prev_blank = 0;
        $para_start = $ln if $para eq "";
        $para .= "$l\n";
    }
    $flush->();
}

# (d) Comments in the code: a path that starts with a top-level entry, or a
# test whose suite exists, named in a C comment must exist too.
my $n_src = 0;
for my $src (sort grep { /\.[ch]$/ && !m{^tests/fixtures/} && !m{^tests/fuzz/corpus/} } @tree) {
    my $s = slurp($src) // next;
    $n_src++;
    while ($s =~ m{/\*(.*?)\*/|//([^\n]*)}gs) {
        my ($body, $pos) = (defined $1 ? $1 : $2, defined $1 ? $-[1] : $-[2]);
        my $ln = 1 + (() = substr($s, 0, $pos) =~ /\n/g);
        for my $l (split /\n/, $body, -1) {
            check_word($src, $ln, $_, 0) for split /[\s=,;|<>()\[\]{}`\x27"]+/, $l;
            $ln++;
        }
    }
}

# (c) The protocol version: WIRE.md against the constants the handshake may send.
my ($wire) = grep { $file{$_} } ("peer/wire/WIRE.md", "peer/net/WIRE.md");
if ($wire) {
    my @w = split /\n/, slurp($wire);
    my ($doc, $doc_ln);
    for my $i (0 .. $#w) {
        if ($w[$i] =~ /^#\s.*\bversion\s+(\d+)/i) { ($doc, $doc_ln) = ($1, $i + 1); last; }
    }
    if (!defined $doc) {
        for my $i (0 .. $#w) {
            if ($w[$i] =~ /^[*_]*(?:protocol |wire |format )?version[*_:]*\s+(\d+)\W*$/i) { ($doc, $doc_ln) = ($1, $i + 1); last; }
        }
    }
    if (!defined $doc) { problem($wire, 1, "states no protocol version (\"# ..., version N\" or a line \"Version: N\")"); }
    else {
        for my $i (0 .. $#w) {
            while ($w[$i] =~ /\bversion u16 = (\d+)/g) {
                problem($wire, $i + 1, "version u16 = $1, but the title says version $doc") if $1 != $doc;
            }
        }
        my (%def, @ver);
        my $VER = qr/^[A-Z0-9_]*(?:PROTOCOL|WIRE|SEC)_VERSION$/;
        for my $h (grep { /\.h$/ && !m{^tests/} } @tree) {
            my @l = split /\n/, slurp($h) // "";
            for my $i (0 .. $#l) {
                my ($name, $val);
                if ($l[$i] =~ /^\s*#\s*define\s+([A-Za-z_]\w*)\s+\(?\s*([A-Za-z_]\w*|\d+)[uU]?\s*\)?\s*(?:\/[*\/].*)?$/) {
                    ($name, $val) = ($1, $2);
                    $def{$name} = $val;
                } elsif ($l[$i] =~ /\b([A-Z0-9_]*(?:PROTOCOL|WIRE|SEC)_VERSION)\s*=\s*\(?\s*(\d+|[A-Za-z_]\w*)[uU]?\s*\)?\s*[,;}]?/) {
                    ($name, $val) = ($1, $2);
                    $def{$name} = $val;
                } else { next; }
                push @ver, [$name, $val, $h, $i + 1] if $name =~ $VER;
            }
        }
        problem($wire, $doc_ln, "no constant *PROTOCOL_VERSION, *WIRE_VERSION or *SEC_VERSION in the headers to compare version $doc with") unless @ver;
        for my $v (@ver) {
            my ($name, $val, $h, $ln) = @$v;
            my %seen;
            while ($val !~ /^\d+$/ && defined $def{$val} && !$seen{$val}++) { $val = $def{$val}; }
            if ($val !~ /^\d+$/) { problem($h, $ln, "$name is $val, which is not a number this check can follow"); }
            elsif ($val != $doc) { problem($h, $ln, "$name is $val, but $wire:$doc_ln says version $doc"); }
        }
    }
}

print "$_\n" for @problems;
my $n_md = grep { /\.md$/ && !m{^tests/fixtures/} && !m{^tests/fuzz/corpus/} } @tree;
printf STDERR "check_docs: %d documents and the comments of %d source files, %d path and %d test references", $n_md, $n_src, $n_paths, $n_tests;
if (@problems) {
    printf STDERR ", %d problem%s\n", scalar @problems, @problems == 1 ? "" : "s";
    exit 1;
}
print STDERR ", no problem\n";
exit 0;
'
