#!/usr/bin/env bash
# Developer check: builds the guest tools for the host (separate target dir) and compares their
# output with the GNU tools installed on this machine. Prints "N passed, N failed".
# The .wasm builds themselves are not run here (no WASI runtime on the dev machine).
set -u
cd "$(dirname "$0")"
cargo build --release -j "${JOBS:-2}" --target-dir target/native -q || exit 1
BIN="$PWD/target/native/release"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin"
while read -r tool wasm; do
    case "$tool" in '#'*|'') continue ;; esac
    ln -sf "$BIN/${wasm%.wasm}" "$W/bin/$tool"
done < commands.txt
T="$W/bin"
cd "$W"
mkdir -p d/sub && printf 'b\na\nc\na\n' > d/f1 && printf 'hello world\nfoo bar\n' > d/sub/f2
printf 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n' > lines
printf 'x,1\ny,2\nz,3\n' > csv
printf '{"a":1,"b":[1,2,{"c":"x"}],"s":"hi"}\n' > j.json

pass=0
fail=0
# same NAME 'cmd using $T/tool' 'reference cmd': compares stdout and exit status.
same() {
    local name=$1 ours=$2 ref=$3 a b ea eb
    a=$(cd "$W" && eval "$ours" 2>/dev/null); ea=$?
    b=$(cd "$W" && eval "$ref" 2>/dev/null); eb=$?
    if [ "$a" == "$b" ] && [ "$ea" == "$eb" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $name"
        echo "  ours ($ea): $(printf '%s' "$a" | head -c 300)"
        echo "  ref  ($eb): $(printf '%s' "$b" | head -c 300)"
    fi
}
# expect NAME 'cmd' 'expected stdout'
expect() {
    local name=$1 out
    out=$(cd "$W" && eval "$2" 2>&1)
    if [ "$out" == "$3" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $name"; echo "  got: $out"; echo "  want: $3"; fi
}

# coreutils (uutils) and the real-message check
same sort "printf 'b\na\nc\n' | \$T/sort" "printf 'b\na\nc\n' | sort"
same sort-nr "printf '10\n9\n100\n' | \$T/sort -nr" "printf '10\n9\n100\n' | sort -nr"
same uniq-c "sort d/f1 | \$T/uniq -c" "sort d/f1 | uniq -c"
same wc "\$T/wc lines" "wc lines"
same head "\$T/head -n 3 lines" "head -n 3 lines"
same tail "\$T/tail -n 2 lines" "tail -n 2 lines"
same cut "\$T/cut -d, -f2 csv" "cut -d, -f2 csv"
same tr "echo hello | \$T/tr a-z A-Z" "echo hello | tr a-z A-Z"
same seq "\$T/seq 1 3 10" "seq 1 3 10"
same base64 "echo hi | \$T/base64" "echo hi | base64"
same sha256 "\$T/sha256sum lines" "sha256sum lines"
same md5 "\$T/md5sum lines" "md5sum lines"
same nl "\$T/nl lines" "nl lines"
same tac "\$T/tac lines" "tac lines"
same od "printf 'abc' | \$T/od -c" "printf 'abc' | od -c"
same cat-missing "\$T/cat nope" "cat nope"
expect cat-missing-msg "\$T/cat nope" "cat: nope: No such file or directory"
expect ls-total "\$T/ls -l d | head -1" "total 8"
expect ls-missing "\$T/ls nope" "ls: cannot access 'nope': No such file or directory"
same coreutils-dispatch "$BIN/coreutils echo 2>/dev/null; \$T/basename /a/b.txt .txt" "basename /a/b.txt .txt"
same stat-format "\$T/stat -c '%s %n %F' lines" "stat -c '%s %n %F' lines"
same chmod-bad "\$T/chmod zz lines" "chmod zz lines"
same true-false "\$T/true && ! \$T/false && echo ok" "echo ok"

# du (ours is hand-written; natively it reads st_blocks, so even disk usage must match GNU).
# Entries are compared sorted: GNU lists a directory in readdir order, ours in name order.
mkdir -p dt/a/deep dt/b -- -dash
head -c 1536 /dev/zero > dt/a/f1536 && head -c 12000 /dev/zero > dt/a/deep/f12000
head -c 1100000 /dev/zero > dt/b/f1100000 && truncate -s 3000000 dt/b/sparse
printf 'x' > dt/one && ln -s one dt/link
# Which name of a hard link gets counted depends on traversal order, so they live apart.
mkdir hl && printf 'abc' > hl/one && ln hl/one hl/two
same du "\$T/du -b lines" "du -b lines"
same du-default "\$T/du dt | LC_ALL=C sort" "du dt | LC_ALL=C sort"
same du-b "\$T/du -b dt | LC_ALL=C sort" "du -b dt | LC_ALL=C sort"
same du-sb "\$T/du -sb dt" "du -sb dt"
same du-ab "\$T/du -ab dt/a dt/b | LC_ALL=C sort" "du -ab dt/a dt/b | LC_ALL=C sort"
same du-hardlink-once "\$T/du -sb hl; \$T/du -cb hl/one hl/two" "du -sb hl; du -cb hl/one hl/two"
same du-c "\$T/du -c -b dt/a dt/b | LC_ALL=C sort" "du -c -b dt/a dt/b | LC_ALL=C sort"
same du-max-depth "\$T/du --max-depth=1 -b dt | LC_ALL=C sort" "du --max-depth=1 -b dt | LC_ALL=C sort"
same du-d0-a "\$T/du -a -d 0 dt; \$T/du -ad1 dt/a | LC_ALL=C sort" "du -a -d 0 dt; du -ad1 dt/a | LC_ALL=C sort"
same du-h "\$T/du -ah dt | LC_ALL=C sort" "du -ah dt | LC_ALL=C sort"
same du-h-apparent "\$T/du -ah --apparent-size dt | LC_ALL=C sort" "du -ah --apparent-size dt | LC_ALL=C sort"
same du-si "\$T/du -a --si --apparent-size dt | LC_ALL=C sort" "du -a --si --apparent-size dt | LC_ALL=C sort"
same du-sh-multi "\$T/du -sh dt/a dt/b dt" "du -sh dt/a dt/b dt"
same du-k-m-B "for o in -k -m -BM '-B 2K' -BKB; do \$T/du -s \$o dt/a dt/b dt; done" "for o in -k -m -BM '-B 2K' -BKB; do du -s \$o dt/a dt/b dt; done"
same du-dedup-operands "\$T/du -b dt/a dt dt/a | LC_ALL=C sort" "du -b dt/a dt dt/a | LC_ALL=C sort"
same du-symlink "\$T/du -b dt/link; \$T/du -bD dt/link" "du -b dt/link; du -bD dt/link"
same du-trailing-slash "\$T/du -ab dt/b// | LC_ALL=C sort" "du -ab dt/b// | LC_ALL=C sort"
same du-dashdash "\$T/du -sb -- -dash" "du -sb -- -dash"
same du-null "\$T/du -0 -sb dt | tr '\\0' '\\n'" "du -0 -sb dt | tr '\\0' '\\n'"
same du-missing "\$T/du -sb nope dt" "du -sb nope dt"
expect du-missing-msg "\$T/du -sb nope dt 2>&1 >/dev/null" "du: cannot access 'nope': No such file or directory"
same du-dot "cd dt/a && \$T/du -ab | LC_ALL=C sort" "cd dt/a && du -ab | LC_ALL=C sort"
same du-s-a-conflict "\$T/du -sa dt" "du -sa dt"

# grep
same grep-basic "\$T/grep a d/f1" "grep a d/f1"
same grep-n "\$T/grep -n a d/f1" "grep -n a d/f1"
same grep-c "\$T/grep -c a d/f1" "grep -c a d/f1"
same grep-v "\$T/grep -v a d/f1" "grep -v a d/f1"
same grep-i "printf 'Foo\nbar\n' | \$T/grep -i foo" "printf 'Foo\nbar\n' | grep -i foo"
same grep-o "echo 'ab12cd345' | \$T/grep -oE '[0-9]+'" "echo 'ab12cd345' | grep -oE '[0-9]+'"
same grep-w "printf 'foo\nfoobar\nfoo bar\n' | \$T/grep -w foo" "printf 'foo\nfoobar\nfoo bar\n' | grep -w foo"
same grep-x "printf 'foo\nfoobar\n' | \$T/grep -x foo" "printf 'foo\nfoobar\n' | grep -x foo"
same grep-F "printf 'a.b\naxb\n' | \$T/grep -F a.b" "printf 'a.b\naxb\n' | grep -F a.b"
same grep-bre "printf 'aa\nab\n' | \$T/grep 'a\\{2\\}'" "printf 'aa\nab\n' | grep 'a\\{2\\}'"
same grep-bre-group "printf 'abab\nab\n' | \$T/grep '\\(ab\\)\\{2\\}'" "printf 'abab\nab\n' | grep '\\(ab\\)\\{2\\}'"
same grep-ere-alt "printf 'cat\ndog\nbird\n' | \$T/grep -E 'cat|dog'" "printf 'cat\ndog\nbird\n' | grep -E 'cat|dog'"
same grep-backref "printf 'abab\nabcd\n' | \$T/grep -E '(ab)\\1'" "printf 'abab\nabcd\n' | grep -E '(ab)\\1'"
same grep-multi "\$T/grep a d/f1 lines" "grep a d/f1 lines"
same grep-h "\$T/grep -h a d/f1 lines" "grep -h a d/f1 lines"
same grep-l "\$T/grep -l o d/f1 d/sub/f2 lines" "grep -l o d/f1 d/sub/f2 lines"
same grep-L "\$T/grep -L o d/f1 d/sub/f2 lines" "grep -L o d/f1 d/sub/f2 lines"
same grep-r "\$T/grep -r o d | sort" "grep -r o d | sort"
same grep-r-implicit "cd d && \$T/grep -r hello | sort" "cd d && grep -r hello | sort"
same grep-q "\$T/grep -q a d/f1" "grep -q a d/f1"
same grep-nomatch "\$T/grep zzz d/f1" "grep zzz d/f1"
same grep-missing "\$T/grep a nope" "grep a nope"
same grep-A "\$T/grep -A1 three lines" "grep -A1 three lines"
same grep-B "\$T/grep -B2 five lines" "grep -B2 five lines"
same grep-C "\$T/grep -n -C1 -e two -e six lines" "grep -n -C1 -e two -e six lines"
same grep-C-sep "\$T/grep -C1 -e one -e six lines" "grep -C1 -e one -e six lines"
same grep-m "\$T/grep -m1 a d/f1" "grep -m1 a d/f1"
same grep-class "printf 'a1\nb\n' | \$T/grep '[[:digit:]]'" "printf 'a1\nb\n' | grep '[[:digit:]]'"

# sed
same sed-s "echo hello | \$T/sed 's/l/L/'" "echo hello | sed 's/l/L/'"
same sed-g "echo hello | \$T/sed 's/l/L/g'" "echo hello | sed 's/l/L/g'"
same sed-n-p "\$T/sed -n '2,4p' lines" "sed -n '2,4p' lines"
same sed-d "\$T/sed '/o/d' lines" "sed '/o/d' lines"
same sed-E "echo 'a1b22' | \$T/sed -E 's/[0-9]+/<&>/g'" "echo 'a1b22' | sed -E 's/[0-9]+/<&>/g'"
same sed-bre-group "echo 'hello world' | \$T/sed 's/\\(hello\\) \\(world\\)/\\2 \\1/'" "echo 'hello world' | sed 's/\\(hello\\) \\(world\\)/\\2 \\1/'"
same sed-last "\$T/sed -n '\$p' lines" "sed -n '\$p' lines"
same sed-neg "\$T/sed '2,\$!d' lines" "sed '2,\$!d' lines"
same sed-aic "\$T/sed -e '1i\\
top' -e '2a\\
after' -e '3c\\
changed' lines" "sed -e '1i\\
top' -e '2a\\
after' -e '3c\\
changed' lines"
same sed-y "echo abc | \$T/sed 'y/abc/xyz/'" "echo abc | sed 'y/abc/xyz/'"
same sed-eq "\$T/sed -n '/four/=' lines" "sed -n '/four/=' lines"
same sed-q "\$T/sed 3q lines" "sed 3q lines"
same sed-block "\$T/sed -n '/t/{s/t/T/;p}' lines" "sed -n '/t/{s/t/T/;p}' lines"
same sed-nth "echo aaaa | \$T/sed 's/a/b/3'" "echo aaaa | sed 's/a/b/3'"
same sed-I "echo Hello | \$T/sed 's/hello/bye/I'" "echo Hello | sed 's/hello/bye/I'"
same sed-i "cp lines l2 && \$T/sed -i 's/one/ONE/' l2 && cat l2" "cp lines l3 && sed -i 's/one/ONE/' l3 && cat l3"

# awk (reference: the system awk; avoid gawk-only output differences)
same awk-print "\$T/awk '{print \$2, \$1}' d/sub/f2" "awk '{print \$2, \$1}' d/sub/f2"
same awk-F "\$T/awk -F, '{s+=\$2} END {print s}' csv" "awk -F, '{s+=\$2} END {print s}' csv"
same awk-v "\$T/awk -v x=5 'BEGIN {print x*2}'" "awk -v x=5 'BEGIN {print x*2}'"
same awk-printf "\$T/awk -F, '{printf \"%-3s|%05.1f\\n\", \$1, \$2}' csv" "awk -F, '{printf \"%-3s|%05.1f\\n\", \$1, \$2}' csv"
same awk-arrays "\$T/awk '{c[\$1]++} END {for (k in c) print k, c[k]}' d/f1 | sort" "awk '{c[\$1]++} END {for (k in c) print k, c[k]}' d/f1 | sort"
same awk-funcs "echo 'Hello World' | \$T/awk '{n=split(\$0,a,\" \"); gsub(/o/,\"0\"); print n, a[2], toupper(\$1), length(\$0), substr(\$0,2,3), index(\$0,\"W\")}'" "echo 'Hello World' | awk '{n=split(\$0,a,\" \"); gsub(/o/,\"0\"); print n, a[2], toupper(\$1), length(\$0), substr(\$0,2,3), index(\$0,\"W\")}'"
same awk-match "echo 'foo123bar' | \$T/awk '{ if (match(\$0, /[0-9]+/)) print RSTART, RLENGTH }'" "echo 'foo123bar' | awk '{ if (match(\$0, /[0-9]+/)) print RSTART, RLENGTH }'"
same awk-NR-NF "\$T/awk 'NR>1 && NF {print NR\":\"NF\":\"\$NF}' d/sub/f2 lines" "awk 'NR>1 && NF {print NR\":\"NF\":\"\$NF}' d/sub/f2 lines"
same awk-func "\$T/awk 'function f(x) { return x*x } BEGIN { print f(7) }'" "awk 'function f(x) { return x*x } BEGIN { print f(7) }'"
same awk-getline "\$T/awk 'BEGIN { while ((getline line < \"csv\") > 0) n++; print n }'" "awk 'BEGIN { while ((getline line < \"csv\") > 0) n++; print n }'"
same awk-OFS "\$T/awk 'BEGIN{OFS=\"-\"} {\$1=\$1; print}' d/sub/f2" "awk 'BEGIN{OFS=\"-\"} {\$1=\$1; print}' d/sub/f2"
same awk-range "\$T/awk '/two/,/four/' lines" "awk '/two/,/four/' lines"
same awk-missing "\$T/awk '{print}' nope" "awk '{print}' nope"

# find, diff, cmp
same find-name "\$T/find d -name 'f*' | sort" "find d -name 'f*' | sort"
same find-type "\$T/find d -type d | sort" "find d -type d | sort"
same find-maxdepth "\$T/find d -maxdepth 1 | sort" "find d -maxdepth 1 | sort"
same find-or "\$T/find d \\( -name f1 -o -name sub \\) | sort" "find d \\( -name f1 -o -name sub \\) | sort"
same find-not "\$T/find d -not -type d | sort" "find d -not -type d | sort"
same find-size "\$T/find d -type f -size -1k | sort" "find d -type f -size -1k | sort"
same find-printf "\$T/find d -type f -printf '%f %s\\n' | sort" "find d -type f -printf '%f %s\\n' | sort"
same find-missing "\$T/find nope" "find nope"
same diff-normal "\$T/diff d/f1 lines" "diff d/f1 lines"
same diff-same "\$T/diff lines lines" "diff lines lines"
same diff-q "\$T/diff -q d/f1 lines" "diff -q d/f1 lines"
same diff-u-body "\$T/diff -u d/f1 lines | tail -n +3" "diff -u d/f1 lines | tail -n +3"
same cmp-diff "\$T/cmp d/f1 lines" "cmp d/f1 lines"
same cmp-same "\$T/cmp lines lines" "cmp lines lines"

# rev, xxd, hexdump
same rev "printf 'abc\nxyz\n' | \$T/rev" "printf 'abc\nxyz\n' | rev"
same xxd "\$T/xxd lines" "xxd lines"
same xxd-p "\$T/xxd -p lines" "xxd -p lines"
same xxd-g1 "\$T/xxd -g1 -c8 lines" "xxd -g1 -c8 lines"
same xxd-r "\$T/xxd lines | \$T/xxd -r" "cat lines"
same hexdump-C "\$T/hexdump -C lines" "hexdump -C lines"
same hexdump-squeeze "head -c 100 /dev/zero | \$T/hexdump -C" "head -c 100 /dev/zero | hexdump -C"

# gzip/tar
same gzip-roundtrip "\$T/gzip -c lines | \$T/gunzip -c" "cat lines"
same gzip-compat "\$T/gzip -c lines | gzip -dc" "cat lines"
same zcat "gzip -c lines > l.gz && \$T/zcat l.gz" "cat lines"
same gzip-file "cp lines g1 && \$T/gzip g1 && ls g1* && \$T/gunzip g1.gz && cat g1" "cp lines g2 && gzip g2 && ls g2* | sed 's/g2/g1/' && gunzip g2.gz && cat g2"
same tar-list "\$T/tar czf t.tgz d && tar tzf t.tgz | sort" "tar czf r.tgz d && tar tzf r.tgz | sort"
same tar-t-ours "tar czf r2.tgz d && \$T/tar tzf r2.tgz | sort" "tar czf r3.tgz d && tar tzf r3.tgz | sort"
same tar-x "mkdir -p x1 && \$T/tar czf t2.tgz d && \$T/tar xzf t2.tgz -C x1 && cat x1/d/sub/f2" "cat d/sub/f2"
same tar-x-auto "mkdir -p x2 && tar czf t3.tgz d && \$T/tar -xf t3.tgz -C x2 && cat x2/d/f1" "cat d/f1"

# jq
same jq-pretty "\$T/jq . j.json" "jq . j.json"
same jq-c "\$T/jq -c .b j.json" "jq -c .b j.json"
same jq-r "\$T/jq -r .s j.json" "jq -r .s j.json"
same jq-n-arg "\$T/jq -n --arg x hi --argjson y 3 '{x: \$x, y: (\$y+1)}'" "jq -n --arg x hi --argjson y 3 '{x: \$x, y: (\$y+1)}'"
same jq-s "printf '1 2 3' | \$T/jq -s add" "printf '1 2 3' | jq -s add"
same jq-e-false "echo 'false' | \$T/jq -e ." "echo 'false' | jq -e ."
same jq-map "echo '[1,2,3]' | \$T/jq -c 'map(.*2) | select(length > 1)'" "echo '[1,2,3]' | jq -c 'map(.*2) | select(length > 1)'"
same jq-keys "\$T/jq -c 'keys, (.b[2] | to_entries)' j.json" "jq -c 'keys, (.b[2] | to_entries)' j.json"
same jq-inputs "printf '1\n2\n3\n' | \$T/jq -n '[inputs] | add'" "printf '1\n2\n3\n' | jq -n '[inputs] | add'"
same jq-err "echo '{}' | \$T/jq '.a.b.c = 1 | .a | keys | .[0] + 1'" "echo '{}' | jq '.a.b.c = 1 | .a | keys | .[0] + 1'"
same jq-syntax "\$T/jq '.[' j.json" "jq '.[' j.json"

# test guests
same flood "$BIN/flood 200000 | wc -c" "echo 200000"
same flood-epipe "$BIN/flood | head -c 10" "printf yyyyyyyyyy"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
