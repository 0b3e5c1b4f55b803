#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check-layers.sh [ROOT] - the shape of src/ (issue 24), run by `make lint`:
#  1. the folder include graph: each `#include "X/..."` in src/A/*.c|h is an edge A -> X. It fails
#     on a cycle between folders (printed) and on an edge the layer table below does not allow.
#     The table is drawn in docs/ARCHITECTURE.md, "Folders": change both together.
#  2. function length: it fails on a function in src/ over 150 lines, measured from the `{` in
#     column 0 that opens its body to the `}` in column 0 that closes it, both counted, unless
#     ROOT/scripts/long-functions.allow lists it ("FILE FUNCTION REASON", one per line, `#`
#     comments), with its reason.
# ROOT defaults to the repository; tests/unit/test_check_layers.sh runs it on a made-up tree.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
max_lines=150

# The layer table: each folder of src/ and the folders it may include, lowest layers first.
# A folder not listed may include only common. `core` is the namespace type every service sees
# (core/ns.h) and the daemon's shared state (core/state.h: struct tierd, its config types), which
# only the daemon and the control API include (docs/ARCHITECTURE.md, "What still takes struct
# tierd").
declare -A allow=(
    [common]=""
    [tiers]="common"
    [telemetry]="common"
    [advice]="common"
    [tenant]="common"
    [cache]="tiers common"
    [writeback]="tiers common"
    [qos]="tiers telemetry common"
    [core]="cache tiers common"
    [datasets]="core tiers common"
    [stage]="core datasets cache tiers common"
    [hints]="core datasets cache tenant tiers common"
    [jobs]="stage common"
    [cluster]="common"
    [lifecycle]="core datasets stage tenant writeback cache tiers common"
    [fuse]="core hints datasets lifecycle stage tenant telemetry writeback cache tiers common"
    [api]="advice core cluster hints datasets jobs lifecycle stage qos telemetry tenant writeback cache tiers common"
    [daemon]="advice core api cluster fuse hints datasets jobs lifecycle stage qos telemetry tenant writeback cache tiers common"
    [cli]="telemetry common"
    [tierbench]="common"
)

# core/state.h is the daemon's whole state: only these folders include it; the others see
# core/ns.h (a namespace) and are opened with a context of what they use.
state_users="core daemon api"

status=0
edges=$(find src -name '*.[ch]' | sort | while IFS= read -r f; do
    a=$(echo "$f" | cut -d/ -f2)
    sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([A-Za-z0-9_]+)\/.*/\1/p' "$f" |
        while IFS= read -r x; do
            [ "$x" = "$a" ] || echo "$a $x $f"
        done
done)

# Edges the table does not allow (each with the files that make it).
while read -r a x f; do
    [ -n "$a" ] || continue
    ok=0
    for y in ${allow[$a]:-common}; do
        [ "$y" = "$x" ] && ok=1
    done
    if [ "$ok" -eq 0 ]; then
        echo "check-layers: $f: src/$a may not include src/$x (layer table in scripts/check-layers.sh)"
        status=1
    fi
done <<<"$edges"

# core/state.h outside the folders that still take struct tierd.
while IFS= read -r f; do
    [ -n "$f" ] || continue
    a=$(echo "$f" | cut -d/ -f2)
    case " $state_users " in
    *" $a "*) ;;
    *)
        echo "check-layers: $f: src/$a may not include core/state.h (the daemon's whole state; take a context: docs/ARCHITECTURE.md, \"Folders\")"
        status=1
        ;;
    esac
done < <(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"core/state\.h"' src --include='*.[ch]' | sort)

# Cycles between folders: a depth-first search over the folder graph; prints each cycle found.
cycles=$(echo "$edges" | awk 'NF >= 2 { print $1, $2 }' | sort -u | awk '
    { adj[$1] = adj[$1] " " $2; nodes[$1] = 1; nodes[$2] = 1 }
    function dfs(u,    n, i, v, vs, j, c) {
        state[u] = 1; stack[++top] = u
        n = split(adj[u], vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]
            if (state[v] == 1) {
                c = v
                for (j = top; j >= 1 && stack[j] != v; j--) c = stack[j] " -> " c
                print v " -> " c
            } else if (state[v] == 0) dfs(v)
        }
        top--; state[u] = 2
    }
    END { for (u in nodes) if (state[u] == 0) dfs(u) }')
if [ -n "$cycles" ]; then
    while IFS= read -r c; do
        echo "check-layers: cycle between folders: $c"
    done <<<"$cycles"
    status=1
fi

# Function length.
allowfile=scripts/long-functions.allow
long=$(find src -name '*.[ch]' | sort | xargs -r awk -v max="$max_lines" '
    FNR == 1 { infn = 0; sig = "" }
    !infn && /^[A-Za-z_]/ { sig = $0 }
    !infn && /^[ \t]/ && sig != "" && sig !~ /[;{}]/ { sig = sig $0 }
    !infn && /^{/ {
        infn = 1; start = FNR; name = "?"
        if (match(sig, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
            name = substr(sig, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
        }
        next
    }
    infn && /^}/ {
        if (FNR - start + 1 > max) print FILENAME, name, FNR - start + 1, start
        infn = 0; sig = ""; next
    }
    !infn && /;[ \t]*$/ { sig = "" }')
nallowed=0
while read -r f name n line; do
    [ -n "$f" ] || continue
    if [ -f "$allowfile" ] && grep -qE "^${f}[[:space:]]+${name}[[:space:]]+[^[:space:]]" "$allowfile"; then
        nallowed=$((nallowed + 1))
        continue
    fi
    echo "check-layers: $f:$line: $name() is $n lines, over $max_lines (split it along its steps, or list it with its reason in $allowfile)"
    status=1
done <<<"$long"
# An entry whose function is no longer over the limit (split, renamed or moved) goes: the list
# names only what is long now.
if [ -f "$allowfile" ]; then
    while read -r f name _; do
        case $f in '' | '#'*) continue ;; esac
        if ! grep -qE "^${f} ${name} " <<<"$long"; then
            echo "check-layers: $allowfile: $f $name is not over $max_lines lines (any more): remove its entry"
            status=1
        fi
    done <"$allowfile"
fi

if [ "$status" -ne 0 ]; then
    exit 1
fi
echo "check-layers: ok ($(echo "$edges" | awk 'NF >= 2 { print $1, $2 }' | sort -u | wc -l) folder edges, no cycle; $nallowed allow-listed functions over $max_lines lines)"
