# tcpadvise: `make demo` and `make test` are the two commands that matter;
# both install what is missing first.
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
PYTEST ?= python3 -m pytest

DESTDIR ?=

.PHONY: deps build install install-built uninstall demo test test-cpp test-python test-asan test-tsan bench clean

deps:
	scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

# Installs like a system tool under PREFIX (README, Installing): the shim in
# lib/tcpadvise, helper programs in libexec/tcpadvise, man pages, completions,
# pkg-config and CMake files. Then the command: TCPADVISE_PREFIX=PREFIX pip install ./advisor
install: build
	$(MAKE) install-built

# The build as it is, without building first.
install-built:
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# Removes every file the last install from $(BUILD) wrote (its
# install_manifest.txt, which names them without DESTDIR: give the same one),
# then the directories of tcpadvise's own left empty.
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "uninstall: no $(BUILD)/install_manifest.txt: nothing was installed from $(BUILD)" >&2; exit 1; }
	sed 's|^|$(DESTDIR)|' $(BUILD)/install_manifest.txt | xargs -r -d '\n' rm -f --
	sed -n 's|^\(.*\)/[^/]*$$|$(DESTDIR)\1|p' $(BUILD)/install_manifest.txt | sort -u | grep '/tcpadvise$$' | \
	  xargs -r -d '\n' rmdir --ignore-fail-on-non-empty --
	rm -f $(BUILD)/install_manifest.txt

demo: install
	scripts/demo.sh $(BUILD)

test: build test-cpp test-python test-asan test-tsan

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python:
	TCPADVISE_BUILD=$(BUILD) $(PYTEST) -q tests/advisor tests/e2e tests/ab tests/conformance tests/faults \
	  tests/realprogs tests/rules tests/bench tests/callsites tests/install

# The shim and its unit tests built with AddressSanitizer and UBSan; the
# end-to-end tests preload libasan ahead of the instrumented shim.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DTCPADVISE_SANITIZE=ON -DTCPADVISE_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	TCPADVISE_BUILD=$(ASAN_BUILD) TCPADVISE_PRELOAD_FIRST=$$(gcc -print-file-name=libasan.so) \
	  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(PYTEST) -q tests/e2e tests/ab tests/conformance tests/faults tests/callsites

# ThreadSanitizer where threads meet: the core's concurrency tests, and the
# end-to-end and conformance cases marked `thread` (application threads, fork,
# the snapshot and deadline threads; conformance under every policy). Not the
# signal handler cases: TSan must come first in LD_PRELOAD, so the shim's wait
# hooks run inside TSan's own interceptors, where it neither sees the shim's
# locks nor delivers signals as the kernel would (they run under ASan instead);
# libtcpadvise/tsan.supp drops the races that blindness reports in wait hooks.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DTCPADVISE_TSAN=ON -DTCPADVISE_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	TCPADVISE_BUILD=$(TSAN_BUILD) TCPADVISE_PRELOAD_FIRST=$$(gcc -print-file-name=libtsan.so) \
	  TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/libtcpadvise/tsan.supp \
	  $(PYTEST) -q tests/e2e tests/conformance tests/faults -m thread -k "not signal"

bench: build
	$(BUILD)/bench/hooks_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
	  --benchmark_out=bench/results/hooks.json --benchmark_out_format=json
	bench/observe_overhead.py --build $(BUILD)
	PYTHONPATH=$(CURDIR)/advisor bench/report_scale.py --build $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
