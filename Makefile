# SPDX-License-Identifier: GPL-2.0
#
# Developer entry points of tt-arbiter. The module itself is described in
# Kbuild.
#
#   make                 build tenstorrent.ko against the project's cached
#                        Linux 7.3 test kernel (built on first use)
#   make KDIR=/lib/modules/$(uname -r)/build
#                        build against another kernel's build tree (it must
#                        have CONFIG_RUST=y and its Rust metadata,
#                        $KDIR/rust/libkernel.rmeta; checked first)
#   make check           every test layer, ending with "N passed, N failed"
#   make stress          the reliability suites at stress size (debug
#                        kernel), ending with a table of figures
#   make vm              boot the test VM with the module loaded: a shell
#                        that starts with a tour (no terminal: the demo)
#   make bench           benchmarks (Debian's kernel; TTKMD_KO= adds tt-kmd; figures as SVG)
#   make kcsan           every scenario on the KCSAN (data-race) kernel
#
# Installing (see README "Installing"):
#   make KDIR=... install         modules_install into KDIR's kernel, the
#                                 udev rule (UDEV_POLICY=group: and the group)
#   make install-headers          the uapi header and the C++ wrapper
#                                 under $(PREFIX)/include
#   make dkms-install             copy the source to /usr/src and let DKMS
#                                 build and install it for the running kernel
#                                 (KERNELVER= another), regenerating the Rust
#                                 metadata Debian's headers lack
#   DESTDIR=, PREFIX= (/usr), UDEV_RULES_DIR= (/etc/udev/rules.d),
#   UDEV_POLICY= (tt-kmd: mode 0666, the default; group: 0660 root:tenstorrent),
#   INSTALL_MOD_PATH= (passed to the kernel's modules_install)

KDIR ?=
DESTDIR ?=
PREFIX ?= /usr
UDEV_RULES_DIR ?= /etc/udev/rules.d
UDEV_POLICY ?= tt-kmd
RUSTC ?= rustc

PACKAGE_NAME := tenstorrent-arbiter
PACKAGE_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' $(CURDIR)/dkms.conf)

.PHONY: all modules check stress kcsan vm bench lint clean kdir-check install modules_install \
	install-udev install-headers dkms-install dkms-build dkms-uninstall

all: modules

modules: kdir-check
ifeq ($(KDIR),)
	tools/vm/build-module
else
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
endif

# A kernel tree that cannot build an out-of-tree Rust module makes the
# kernel's build print pages of errors about `kernel` crate metadata; say
# what is missing instead, before starting it.
kdir-check:
ifneq ($(KDIR),)
	@kdir='$(KDIR)'; \
	fail() { printf 'tt-arbiter: cannot build against KDIR=%s:\n' "$$kdir" >&2; \
		printf '  %s\n' "$$@" >&2; exit 1; }; \
	[ -f "$$kdir/Makefile" ] || fail "$$kdir/Makefile does not exist: not a kernel build tree." \
		"Install the kernel's build tree (headers) or point KDIR at a configured, built kernel."; \
	conf="$$kdir/include/config/auto.conf"; [ -f "$$conf" ] || conf="$$kdir/.config"; \
	[ -f "$$conf" ] || fail "no $$kdir/include/config/auto.conf nor $$kdir/.config: the tree is not configured." \
		"Configure and build the kernel (make olddefconfig && make) first."; \
	grep -qs '^CONFIG_RUST=y' "$$conf" || fail "CONFIG_RUST is not set in $$conf." \
		"tenstorrent.ko is written in Rust: it needs a kernel built with CONFIG_RUST=y."; \
	[ -f "$$kdir/rust/libkernel.rmeta" ] || fail "$$kdir/rust/libkernel.rmeta is missing." \
		"The kernel has Rust support but this tree lacks its Rust metadata (rust/*.rmeta)." \
		"Distribution headers packages (Debian's linux-headers-*, for one) do not ship it." \
		"On Debian, regenerate it from the kernel's source: make dkms-install, or" \
		"make KDIR=\$$(packaging/rust-kbuild RELEASE) (README, Installing on Debian's kernel);" \
		"elsewhere build against the kernel's full build tree (make KDIR=/path/to/linux-build)."; \
	want=$$(sed -n 's/^CONFIG_RUSTC_VERSION=//p' "$$conf"); \
	if [ -n "$$want" ]; then \
		have=$$($(RUSTC) --version 2>/dev/null | sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p' | \
			{ read -r a b c && echo $$((a * 100000 + b * 100 + c)); }); \
		[ "$$have" = "$$want" ] || fail "the kernel was built by rustc $$want (CONFIG_RUSTC_VERSION), '$(RUSTC)' is $${have:-missing}." \
			"Rust crates must be built by the exact compiler that built the kernel's metadata;" \
			"put that rustc first in PATH or pass RUSTC=/path/to/rustc."; \
	fi
endif

check:
	tools/check

stress:
	tools/stress

kcsan:
	tools/kcsan

vm: modules
	tools/vm/run --interactive

# In the VM on Debian's stock kernel, with the module installed on it as
# a user does (DKMS); results go to $(TT_CACHE)/bench, not to git
# (tools/bench/run --publish puts one run into README and doc/bench/).
# TTKMD_KO=path/to/tt-kmd's tenstorrent.ko (built by you for that kernel,
# kept out of the tree) adds tt-kmd (2.10, or its PR 266 for SMC_MSG),
# measured in the same boot.
# PUBLISH=1: the run's figures to doc/bench/ and its tables into README.
TTKMD_KO ?=
PUBLISH ?=
bench:
	tools/bench/run $(if $(TTKMD_KO),--ttkmd-ko $(TTKMD_KO)) $(if $(PUBLISH),--publish)

lint:
	tools/vm/build-module --lint

clean:
ifeq ($(KDIR),)
	tools/vm/build-module --clean
else
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
endif

# ---- installing --------------------------------------------------------------

install: modules_install install-udev

ifeq ($(KDIR),)
modules_install:
	@echo "make install needs KDIR (the installed kernel's build tree, e.g. KDIR=/lib/modules/\$$(uname -r)/build)" >&2; exit 1
else
modules_install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
endif

# The udev rule (README "Permissions"). UDEV_POLICY=tt-kmd (the default):
# mode 0666 and the by-id links, as tt-kmd's own rule, so that switching
# drivers locks nobody out. UDEV_POLICY=group: root:tenstorrent 0660 and the
# same links; the group is created on the running system only.
ifeq ($(UDEV_POLICY),tt-kmd)
UDEV_RULE := packaging/60-tenstorrent.rules
else ifeq ($(UDEV_POLICY),group)
UDEV_RULE := packaging/60-tenstorrent-group.rules
endif

install-udev:
ifeq ($(UDEV_RULE),)
	@echo "UDEV_POLICY=$(UDEV_POLICY): not a policy; use tt-kmd (mode 0666, the default) or group (0660, group tenstorrent)" >&2; exit 1
endif
	install -D -m 0644 $(UDEV_RULE) $(DESTDIR)$(UDEV_RULES_DIR)/60-tenstorrent.rules
ifeq ($(DESTDIR),)
ifeq ($(UDEV_POLICY),group)
	getent group tenstorrent >/dev/null || groupadd --system tenstorrent
endif
	-command -v udevadm >/dev/null && udevadm control --reload && \
		udevadm trigger --subsystem-match=tenstorrent --action=add
endif

install-headers:
	install -D -m 0644 include/uapi/linux/tenstorrent.h $(DESTDIR)$(PREFIX)/include/linux/tenstorrent.h
	install -D -m 0644 include/tenstorrent/lock.hpp $(DESTDIR)$(PREFIX)/include/tenstorrent/lock.hpp

# DKMS: the module's sources under /usr/src/NAME-VERSION, then dkms builds
# and installs it for kernel KERNELVER (default: the running one) and, through
# AUTOINSTALL, for every kernel installed later. Headers without the Rust
# metadata (Debian's) get it from packaging/rust-kbuild: here first, with
# its progress on the terminal, so DKMS finds it built.
KERNELVER ?= $(shell uname -r)
DKMS_SRC = $(DESTDIR)/usr/src/$(PACKAGE_NAME)-$(PACKAGE_VERSION)
dkms-install:
	packaging/rust-kbuild $(KERNELVER) >/dev/null
	-dkms status -m $(PACKAGE_NAME) -v $(PACKAGE_VERSION) | grep -q . && \
		dkms remove -m $(PACKAGE_NAME) -v $(PACKAGE_VERSION) --all
	rm -rf $(DKMS_SRC)
	mkdir -p $(DKMS_SRC)
	cp -R Kbuild Makefile dkms.conf src rust include tests packaging $(DKMS_SRC)/
	dkms install -m $(PACKAGE_NAME) -v $(PACKAGE_VERSION) -k $(KERNELVER)

# What dkms.conf's MAKE runs, in DKMS's copy of the sources, for KDIR (the
# headers of kernel KERNELVER).
dkms-build:
	kdir=$$(packaging/rust-kbuild $(KERNELVER) $(KDIR)) && $(MAKE) KDIR="$$kdir" modules

dkms-uninstall:
	-dkms remove -m $(PACKAGE_NAME) -v $(PACKAGE_VERSION) --all
	rm -rf $(DKMS_SRC) /var/cache/tenstorrent-arbiter/kbuild
