#!/usr/bin/env bash
# Writes the examples of peer/wire/WIRE.md ("Examples") into the wire fuzz
# corpus as seeds, one file a line: tests/fuzz/corpus/wire/page_NAME holds
# the line's plaintext bytes. Seeds of examples the page no longer has are
# removed; other seeds are left alone. tests/unit/test_peer_wire_page.c fails
# while the committed seeds differ from the page, so run this after changing
# the examples.
#
#   bash tests/fuzz/corpus_from_wire_page.sh     # from anywhere in the repository
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
page=peer/wire/WIRE.md
dir=tests/fuzz/corpus/wire
mkdir -p "$dir"
rm -f "$dir"/page_*
# The fenced block after the "## Examples" heading: `name | hex | expect`.
perl -ne '
    BEGIN { $dir = shift @ARGV; }
    if (/^## Examples$/) { $in = 1; next; }
    next unless $in;
    if (/^```/) { last if $block; $block = 1; next; }
    next unless $block;
    chomp;
    my ($name, $hex) = split / \| /;
    die "$ARGV:$.: not name | hex | expect\n" unless defined $hex && $name =~ /^[a-z0-9_]+$/;
    $hex =~ s/\s+//g;
    die "$ARGV:$.: not hex\n" unless $hex =~ /^(?:[0-9a-f]{2})*$/;
    open my $f, ">:raw", "$dir/page_$name" or die "$dir/page_$name: $!\n";
    print $f pack("H*", $hex);
    close $f;
    $n++;
    END { print "wrote $n seeds into $dir\n" if defined $n; }
' "$dir" "$page"
