#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The file-level call graph of src/fuse has no cycle (docs/ARCHITECTURE.md, "The FUSE files").
#
# Usage: scripts/check-fuse-calls.sh OBJECT...   (the .o files of src/fuse, e.g. from
#        $<TARGET_OBJECTS:tierd_core> filtered to fuse_*.c.o; objects of other folders are
#        ignored)
#        scripts/check-fuse-calls.sh BUILD_DIR     (finds the fuse_*.o files under it)
#
# An edge A -> B means that A's object file leaves undefined a global symbol that B's defines
# (nm). Calls inside one file and calls to other folders are not edges. Exit 0 when the graph
# is acyclic; otherwise print one cycle with the symbols of each edge and exit 1 (2: usage).
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: $0 BUILD_DIR | OBJECT..." >&2
    exit 2
fi
objs=()
if [[ $# -eq 1 && -d $1 ]]; then
    while IFS= read -r -d '' f; do objs+=("$f"); done \
        < <(find "$1" -xdev -name testtmp -prune -o -name 'fuse_*.o' -print0 | sort -z)
else
    for f in "$@"; do
        case $(basename "$f") in
        fuse_*.o) objs+=("$f") ;;
        esac
    done
fi
if [[ ${#objs[@]} -lt 2 ]]; then
    echo "$0: fewer than two src/fuse object files found (build first): ${objs[*]:-none}" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${objs[@]}"; do
    name=$(basename "$f")
    name=${name%.o}
    name=${name%.c}
    nm --defined-only -g "$f" | awk -v n="$name" 'NF == 3 { print $3, n }' >>"$tmp/def"
    nm -u "$f" | awk -v n="$name" '{ print n, $NF }' >>"$tmp/undef"
done

# file -> file edges with the symbols that make them; then a depth-first search for a cycle.
awk '
    NR == FNR { def[$1] = $2; next }
    ($2 in def) && def[$2] != $1 { print $1, def[$2], $2 }
' "$tmp/def" "$tmp/undef" | sort -u >"$tmp/edges"

awk '
    { key = $1 " " $2; if (!(key in syms)) { adj[$1] = adj[$1] " " $2; syms[key] = $3; ne++ }
      else syms[key] = syms[key] "," $3; nodes[$1]; nodes[$2] }
    function dfs(u,    i, k, vs, v) {
        color[u] = 1; stack[++sp] = u
        k = split(adj[u], vs, " ")
        for (i = 1; i <= k; i++) {
            v = vs[i]
            if (color[v] == 1) { report(v); return 1 }
            if (color[v] == 0 && dfs(v)) return 1
        }
        color[u] = 2; sp--
        return 0
    }
    function report(v,    i, s) {
        for (i = 1; i <= sp; i++) if (stack[i] == v) break
        s = i
        print "src/fuse: the file-level call graph has a cycle:"
        for (; i <= sp; i++) {
            nxt = (i < sp) ? stack[i + 1] : v
            printf "  %s -> %s  (%s)\n", stack[i], nxt, syms[stack[i] " " nxt]
        }
    }
    # every file on some cycle (reaches itself: a transitive closure over the few files)
    function loops(    i, j, k, u, v, vs, m, out) {
        for (u in nodes) { m = split(adj[u], vs, " "); for (i = 1; i <= m; i++) r[u, vs[i]] = 1 }
        for (k = 1; k <= n; k++) for (i = 1; i <= n; i++) for (j = 1; j <= n; j++)
            if ((order[i], order[k]) in r && (order[k], order[j]) in r) r[order[i], order[j]] = 1
        out = ""
        for (i = 1; i <= n; i++) if ((order[i], order[i]) in r) out = out " " order[i]
        print "files on a cycle:" out
    }
    END {
        n = 0
        for (u in nodes) order[++n] = u
        # a stable order, so the cycle printed is the same each run
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
            if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
        for (i = 1; i <= n; i++) if (color[order[i]] == 0 && dfs(order[i])) { loops(); exit 1 }
        printf "src/fuse: %d files, %d file-level call edges, no cycle\n", n, ne
    }
' "$tmp/edges"
