# SPDX-License-Identifier: GPL-2.0
#
# Developer entry points of tt-arbiter. The module itself is described in
# Kbuild.
#
#   make                 build tenstorrent.ko against the project's cached
#                        Linux 7.3 test kernel (built on first use)
#   make KDIR=/lib/modules/$(uname -r)/build
#                        build against another kernel's build tree
#   make check           every test layer, ending with "N passed, N failed"
#   make stress          the reliability suites at stress size (debug
#                        kernel), ending with a table of figures
#   make vm              boot the test VM with the module loaded
#   make bench           benchmarks (non-debug kernel)

KDIR ?=

.PHONY: all modules check stress vm bench lint clean

all: modules

modules:
ifeq ($(KDIR),)
	tools/vm/build-module
else
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
endif

check:
	tools/check

stress:
	tools/stress

vm: modules
	tools/vm/run --interactive

lint:
	tools/vm/build-module --lint

clean:
ifeq ($(KDIR),)
	tools/vm/build-module --clean
else
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
endif
