# shellcheck shell=bash
# Sourced by the text benchmarks (frontier.sh, lm_reference.sh): the same
# training and validation files from the Brown corpus for every system.
#
#   . "$here/text_split.sh"
#   text_split CORPUS DIR TRAIN_BYTES VAL_BYTES   # DIR/train.txt, DIR/held.txt, DIR/val.txt
#
# train.txt is the first TRAIN_BYTES of the part `--data text:FILE` trains
# on, held.txt the tenth it holds out, val.txt its first VAL_BYTES.
text_split() {
    local corpus=$1 dir=$2 want=$3 val=$4 len held
    mkdir -p "$dir"
    len=$(stat -c %s "$corpus")
    # shellcheck disable=SC2017  # the same rounding as sgp's
    held=$((len / 100 * 10 + len % 100 * 10 / 100))
    # (no pipes into head: under pipefail the writer's SIGPIPE would end the script)
    head -c $((want < len - held ? want : len - held)) "$corpus" >"$dir/train.txt"
    tail -c "$held" "$corpus" >"$dir/held.txt"
    head -c "$val" "$dir/held.txt" >"$dir/val.txt"
}
