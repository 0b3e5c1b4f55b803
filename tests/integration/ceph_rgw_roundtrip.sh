#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ceph_rgw_roundtrip.sh - proves the CTest `rgw` fixture (scripts/ceph.sh start) works: the env
# file has all four settings, `ceph.sh status` agrees, and a SigV4-signed S3 round trip with
# curl succeeds against the real RGW (bucket create, put, get byte-identical, ranged get, head
# ETag = MD5, wrong secret refused, delete, get after delete = 404, bucket delete). With the
# cluster bridge (S3_ENDPOINT_CLUSTER in the env file) the object also reads back through RGW's
# endpoint on the bridge's address, on the same port.
# Usage: ceph_rgw_roundtrip.sh SRC_DIR CEPH_DIR
set -euo pipefail

src=$1
dir=$2
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

env_file=$dir/env
[[ -r $env_file ]] || fail "$env_file missing (did the ceph_start fixture run?)"
S3_ENDPOINT='' S3_ENDPOINT_CLUSTER='' S3_REGION='' S3_ACCESS_KEY='' S3_SECRET_KEY=''
while IFS='=' read -r k v; do
    case $k in
    S3_ENDPOINT) S3_ENDPOINT=$v ;;
    S3_ENDPOINT_CLUSTER) S3_ENDPOINT_CLUSTER=$v ;;
    S3_REGION) S3_REGION=$v ;;
    S3_ACCESS_KEY) S3_ACCESS_KEY=$v ;;
    S3_SECRET_KEY) S3_SECRET_KEY=$v ;;
    *) fail "unexpected line in $env_file: $k=$v" ;;
    esac
done <"$env_file"
[[ $S3_ENDPOINT =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || fail "S3_ENDPOINT='$S3_ENDPOINT'"
if [[ -n $S3_ENDPOINT_CLUSTER ]]; then
    [[ $S3_ENDPOINT_CLUSTER =~ ^http://[0-9]+(\.[0-9]+){3}:([0-9]+)$ &&
        ${BASH_REMATCH[2]} == "${S3_ENDPOINT##*:}" ]] ||
        fail "S3_ENDPOINT_CLUSTER='$S3_ENDPOINT_CLUSTER' (S3_ENDPOINT='$S3_ENDPOINT')"
fi
[[ -n $S3_REGION && -n $S3_ACCESS_KEY && -n $S3_SECRET_KEY ]] || fail "incomplete $env_file"
"$src/scripts/ceph.sh" status "$dir" >/dev/null || fail "ceph.sh status says RGW is down"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgw-roundtrip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# s3 SECRET METHOD PATH [curl args]: print the HTTP status of the request to $endpoint; the body
# goes to $tmp/body.
endpoint=$S3_ENDPOINT
s3() {
    local secret=$1 method=$2 path=$3
    shift 3
    curl -s -o "$tmp/body" -w '%{http_code}' --connect-timeout 5 --max-time 60 \
        --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$secret" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$method" "$@" "$endpoint$path"
}
expect() {
    local want=$1 what=$2 got
    shift 2
    got=$("$@") || true
    [[ $got == "$want" ]] || fail "$what: HTTP $got, expected $want: $(head -c 400 "$tmp/body" 2>/dev/null)"
}

bucket=ceph-roundtrip-$$-$RANDOM
key=dir/obj.bin
head -c 1048583 /dev/urandom >"$tmp/obj"
md5=$(md5sum "$tmp/obj" | cut -d' ' -f1)

expect 200 "create bucket" s3 "$S3_SECRET_KEY" PUT "/$bucket"
expect 200 "put object" s3 "$S3_SECRET_KEY" PUT "/$bucket/$key" --data-binary "@$tmp/obj"
expect 200 "get object" s3 "$S3_SECRET_KEY" GET "/$bucket/$key"
cmp -s "$tmp/obj" "$tmp/body" || fail "object read back differs"
if [[ -n $S3_ENDPOINT_CLUSTER ]]; then
    endpoint=$S3_ENDPOINT_CLUSTER
    expect 200 "get object through $endpoint" s3 "$S3_SECRET_KEY" GET "/$bucket/$key"
    endpoint=$S3_ENDPOINT
    cmp -s "$tmp/obj" "$tmp/body" || fail "object read back through $S3_ENDPOINT_CLUSTER differs"
fi
expect 206 "ranged get" s3 "$S3_SECRET_KEY" GET "/$bucket/$key" -H 'Range: bytes=1000-1999'
cmp -s <(tail -c +1001 "$tmp/obj" | head -c 1000) "$tmp/body" || fail "ranged read differs"
curl -s -I --max-time 30 --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    "$S3_ENDPOINT/$bucket/$key" >"$tmp/head"
grep -qi "^etag: \"$md5\"" "$tmp/head" || fail "HEAD ETag is not the MD5 $md5: $(cat "$tmp/head")"
expect 403 "wrong secret" s3 "not-the-secret" GET "/$bucket/$key"
grep -q SignatureDoesNotMatch "$tmp/body" || fail "wrong secret: $(cat "$tmp/body")"
expect 204 "delete object" s3 "$S3_SECRET_KEY" DELETE "/$bucket/$key"
expect 404 "get deleted object" s3 "$S3_SECRET_KEY" GET "/$bucket/$key"
grep -q NoSuchKey "$tmp/body" || fail "get deleted: $(cat "$tmp/body")"
expect 204 "delete bucket" s3 "$S3_SECRET_KEY" DELETE "/$bucket"
echo "ok: signed round trip against $S3_ENDPOINT (region $S3_REGION)"
