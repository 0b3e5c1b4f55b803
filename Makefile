# SPDX-License-Identifier: Apache-2.0
# Thin wrapper over CMake. `make test` is the one command CI runs: it installs dependencies,
# builds with ASan+UBSan and -Werror, checks style, runs every test (Ceph RGW included), then
# the concurrent modules' tests again under ThreadSanitizer, then the release build (make build).
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)

.PHONY: all deps build test test-unit test-tsan test-long fuzz fuzz-long lint format demo bench soak clean deb
DEB_BUILD  ?= build-deb

all: build

deps:
	@scripts/deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

lint:
	scripts/check-banned.sh
	scripts/check-format.sh
	scripts/check-docs.sh
	scripts/check-layers.sh
	scripts/check-shell.sh
	luac5.1 -p contrib/slurm/burst_buffer.lua # the Slurm provider parses as Lua 5.1

test: deps lint
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTIER_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-tsan
	@# the release build that make demo and make soak use (-O2 finds warnings -O0 does not)
	$(MAKE) --no-print-directory build

test-unit: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTIER_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -LE 'rgw|fuse|slurm|slow' -j $(JOBS)

test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTIER_TSAN=ON >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -L tsan

# The crash tests at length (issue 5): the write-back engine killed 2000 times (POSIX backend),
# then the FUSE write path killed 2000 times (CTest's defaults are 50 and 100). Not in CI.
test-long: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTIER_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && WB_CRASH_CYCLES=$${WB_CRASH_CYCLES:-2000} \
	  ctest --output-on-failure -R '^test_wb_crash$$' --timeout 7200
	cmake --build $(ASAN_BUILD) --target test-long-wb

fuzz: deps
	CC=clang-14 cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTIER_FUZZ=ON -DTIER_SANITIZE=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Every libFuzzer target for FUZZ_SECONDS each (default 300) from a copy of its corpus; prints a
# table (executions, findings) for docs/FUZZING.md. Not run in CI.
fuzz-long: fuzz
	scripts/fuzz-long.sh $(FUZZ_BUILD) $${FUZZ_SECONDS:-300}

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

demo: deps build
	scripts/demo.sh

# The Debian package (debian/, docs/PACKAGING.md): dpkg-buildpackage on a copy of the tracked
# tree in $(DEB_BUILD), giving $(DEB_BUILD)/tierd_<version>_<arch>.deb.
deb: deps
	scripts/deb.sh $(DEB_BUILD)

bench: deps build
	@echo "see docs/BENCHMARKS.md for the bench/ scripts and their commands"

# The soak run (issue 9, not in CI): 1 h through the FUSE mount against a private Ceph RGW, with
# tierd SIGKILLed every 4 min and RGW restarted every 7 min (SOAK_SECONDS, SOAK_KILL_EVERY,
# SOAK_RGW_EVERY change it); results in bench/out/soak-*.md. See docs/BENCHMARKS.md, "Soak".
# Builds only the three programs it runs (the RelWithDebInfo build of $(BUILD)).
soak: deps build
	BUILD=$(BUILD) scripts/soak.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
