#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scdoc.sh SCDOC IN OUT: one man page from its scdoc source (docs/man/man.cmake).
set -e
"$1" <"$2" >"$3.tmp"
mv "$3.tmp" "$3"
