# SPDX-License-Identifier: MIT
# splicer: a layer-4 TCP forwarding proxy with splice() engines.
#   make            build build/splicer
#   make run        the main job: a stream pushed through each engine (make run ARGS=...)
#   make test       unit + integration suite (plain and ASan+UBSan proxy builds),
#                   the fault matrix, load, random operations, 20 s fuzz runs and
#                   the differential suite against HAProxy and nginx (tests/peer)
#   make soak       10 minutes of mixed traffic, CSV + chart (SOAK_SECONDS=N)
#   make perf-doc   doc/perf-results.md from one bench run, beside the last tag's build
#   make perf-baseline REV=<revision>   that revision's build in build/baseline/splicer
#   make fleet      a fleet of three behind an ECMP router in network namespaces
#   make fuzz       each libFuzzer harness for FUZZ_SECONDS (default 60)
#   make install    PREFIX=/usr/local DESTDIR= (make uninstall: the same files)
#   make deb        build/splicer_VERSION_ARCH.deb, checked by lintian
#   make image      the container image splicer:VERSION (contrib/Containerfile, podman)
# Quiet unless V=1.

CC      ?= cc
PREFIX  ?= /usr/local
VERSION := 0.1.0
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread \
	   -DSPLICER_VERSION='"$(VERSION)"'
LDLIBS  += -pthread -lssl -lcrypto -lm -linih -lbpf -luring -lcares -lseccomp
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

ifeq ($(V),1)
Q :=
else
Q := @
endif

B        := build
NPROC    := $(shell nproc 2>/dev/null || echo 2)
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo unknown)
DEB      := $(B)/splicer_$(VERSION)_$(DEB_ARCH).deb

# The layers (doc/architecture.md): each folder compiles with the include
# paths of the folders it may use, and no other, so a wrong include fails
# the build; tools/check-layers.sh says which rule and also keeps the core
# free of engine names.
# src/ctl is split by concern (DESIGN.md): the config, the admin socket with
# reload and upgrade, health checks and DNS, the stats endpoint, privileges
# and the sandbox; one layer, so each may use the others.
CTL_DIRS      := src/ctl/config src/ctl/admin src/ctl/health src/ctl/stats src/ctl/sandbox
DIRS          := src/lib src/proto src/engine src/core $(CTL_DIRS) src/app tools/bench tools/xfer
USES_src/lib    := src/lib
USES_src/proto  := src/lib src/proto
USES_src/engine := src/lib src/proto src/engine src/core
USES_src/core   := src/lib src/proto src/core src/engine
$(foreach d,$(CTL_DIRS),$(eval USES_$(d) := src/lib src/proto src/core src/engine $(CTL_DIRS)))
USES_src/app    := $(DIRS)
USES_tools/bench:= src/lib tools/bench src/engine
USES_tools/xfer := src/lib tools/xfer
ALL_INC  := $(addprefix -I,$(DIRS))
uses      = $(addprefix -I,$(USES_$(patsubst %/,%,$(dir $(1)))))

SRCS     := $(foreach d,$(DIRS),$(wildcard $(d)/*.c))
LIB_SRCS := $(filter-out src/app/main.c,$(SRCS))
OBJS     := $(SRCS:%.c=$(B)/obj/%.o)
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
ASAN_OBJS:= $(SRCS:%.c=$(B)/asan/obj/%.o)
UNIT_SRCS:= $(wildcard tests/unit/*/*.c)
INT_SRCS := $(wildcard tests/integration/*.c)
PEER_SRCS:= $(wildcard tests/peer/*.c)
# the hostile suite: attacks on the privilege boundary, the endpoints and
# the limits (doc/security.md), each bounded in seconds
HOST_SRCS:= $(wildcard tests/hostile/*.c)
TEST_SRCS:= $(UNIT_SRCS) $(INT_SRCS) $(PEER_SRCS) $(HOST_SRCS)
HDRS     := $(foreach d,$(DIRS),$(wildcard $(d)/*.h)) $(wildcard tests/integration/*.h tests/peer/*.h tests/hostile/*.h bpf/*.h)

# Debian packages the build, the tests and `make run` need.
DEB_PKGS := gcc make libc6-dev libssl-dev libcriterion-dev libinih-dev iperf3 linux-perf strace ethtool iproute2 mandoc \
	    iptables libnetfilter-queue-dev valgrind clang libbpf-dev liburing-dev libc-ares-dev libseccomp-dev prometheus \
	    openssl curl python3 python3-yaml
# The peers the differential suite (tests/peer) and `splicer bench` compare
# against; socat and gnuplot for the bench and its chart; redis and
# PostgreSQL for `splicer bench --real` (it runs its own servers in a temp
# dir: the packages' services must not start, see tools/deps.sh).
PEER_PKGS  := haproxy nginx libnginx-mod-stream
# redis and PostgreSQL are also the real servers the health checks are
# tested against (tests/integration/test_health_servers.c): `make test`
# installs them too.
SERVER_PKGS:= redis-server redis-tools postgresql
BENCH_PKGS := $(PEER_PKGS) socat gnuplot-nox ethtool iproute2 $(SERVER_PKGS)
# `make deb` and its test (tests/package/deb.sh) build and check the package;
# systemd for systemd-analyze (tests/package/unit_systemd.sh).
PKG_PKGS   := debhelper dpkg-dev lintian systemd
# The status page's browser test (tests/integration/test_status.c) renders
# the stats endpoint's page in headless Chromium: a large package (about
# 120 MB to download with its libraries, some 450 MB installed; 1.5 minutes
# to install on a 2-CPU machine with a nearby Debian mirror).
BROWSER_PKGS := chromium
# make fleet's control plane (and integ/fleet_short's): FRR (bgpd, bfdd,
# zebra) on the router, BIRD 2 on each instance; their services stay off
# (tools/deps.sh), the fleet runs them as its own children.
FLEET_PKGS := bird2 frr
# `make image` and the image's tests (tests/integration/test_image.c): podman
# with the runc runtime, debootstrap for the Debian base images.
IMAGE_PKGS := podman runc debootstrap
IMAGE      := splicer:$(VERSION)
# what the image's build said for its tests (tools/image-build.sh --state)
IMAGE_STATE:= $(B)/image/suite-state
CRITERION_ARGS ?= --jobs 1 --timeout 300

.PHONY: all run test deps peer-deps server-deps bench-deps pkg-deps browser-deps fleet-deps image-deps bench perf-doc perf-baseline \
	install uninstall deb image clean asan fuzz soak

all: $(B)/layers.ok $(B)/splicer

# The layer rules, checked whenever a source or header changes.
$(B)/layers.ok: tools/check-layers.sh $(SRCS) $(HDRS)
	@mkdir -p $(@D)
	$(Q)sh tools/check-layers.sh && touch $@

# The sockmap engine's BPF program, embedded into the binary by
# src/engine/bpf_sockmap.c (.incbin of this object).
BPF_CC   ?= clang
BPF_OBJ  := $(B)/bpf/sockmap.bpf.o
$(BPF_OBJ): bpf/sockmap.bpf.c bpf/sockmap_abi.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  BPF     $<")
	$(Q)$(BPF_CC) -O2 -g -target bpf -I/usr/include/$(shell $(CC) -dumpmachine) -c -o $@ $<

SM_OBJS := $(B)/obj/src/engine/bpf_sockmap.o $(B)/asan/obj/src/engine/bpf_sockmap.o
$(SM_OBJS): $(BPF_OBJ)
$(SM_OBJS): CFLAGS += -DSM_BPF_OBJ='"$(BPF_OBJ)"'

$(B)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(call uses,$<) -c -o $@ $<

$(B)/asan/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC-SAN  $<")
	$(Q)$(CC) $(CFLAGS) $(call uses,$<) $(SAN) -O1 -c -o $@ $<

$(B)/splicer: $(OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/asan/splicer: $(ASAN_OBJS)
	@$(if $(Q),echo "  LD-SAN  $@")
	$(Q)$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

asan: $(B)/asan/splicer

# One Criterion binary holds every test so the run ends with one Synthesis line.
$(B)/tests: $(TEST_SRCS) $(LIB_OBJS) $(HDRS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(ALL_INC) -Itests/integration -Itests/peer -Itests/hostile -o $@ $(TEST_SRCS) $(LIB_OBJS) -lcriterion $(LDLIBS)

# Install what is missing, and only that (apt-get needs root and the
# registry); tools/deps.sh keeps packaged services (HAProxy, nginx) from
# starting and disables those the install enabled.
deps:
	@sh tools/deps.sh $(DEB_PKGS)

peer-deps:
	@sh tools/deps.sh $(PEER_PKGS)

fleet-deps:
	@sh tools/deps.sh $(FLEET_PKGS)

bench-deps:
	@sh tools/deps.sh $(BENCH_PKGS)

server-deps:
	@sh tools/deps.sh $(SERVER_PKGS)

browser-deps:
	@sh tools/deps.sh $(BROWSER_PKGS)

run: deps bench-deps
	$(Q)$(MAKE) --no-print-directory all
	$(B)/splicer bench --quick $(ARGS)

bench: deps bench-deps
	$(Q)$(MAKE) --no-print-directory all
	$(B)/splicer bench --json $(B)/bench.json --chart $(B)/bench.png $(ARGS)

# make doc: the generated parts of doc/configuration.md and doc/splicer.conf.5
# (between their BEGIN/END GENERATED lines) from the binary's settings table;
# tests/integration/test_docs.c fails when they differ.
.PHONY: doc
doc: all
	$(Q)sh tools/doc-region.sh doc/configuration.md $(B)/splicer config-reference
	$(Q)sh tools/doc-region.sh doc/splicer.conf.5 $(B)/splicer config-reference --man

# make perf-baseline REV=<git revision>: splicer as it was at REV, built by
# tools/build-baseline.sh in a temporary git worktree with that revision's
# own Makefile, installed as $(BASELINE_DIR)/splicer (with a REVISION file):
# the build `splicer bench --baseline NAME=PATH` runs beside this one.
# BASELINE_DIR=build/baseline-X keeps several (a bisect).
BASELINE_DIR ?= $(B)/baseline
perf-baseline:
	$(Q)sh tools/build-baseline.sh "$(REV)" "$(BASELINE_DIR)"

# doc/perf-results.md and its chart, regenerated whole from one run that
# covers every goal (doc/performance.md, "Goals"): loopback and veth MTU 1500, one
# and two workers, the engines, HAProxy's two best modes, the real clients,
# and the last tagged release's build as the baseline of auto (its "x TAG"
# columns; about 30 minutes; make perf-doc PERF_CASES=... ARGS='--reps 5'
# BASELINE_REV=<revision> to change it).
PERF_CASES ?= direct,copy,splice,auto,uring,sockmap,haproxy,haproxy-splice
BASELINE_REV ?= $(shell git describe --tags --abbrev=0 2>/dev/null)
# the memory table appended to perf-results.md (bench_idle.h), then the upgrade's (bench_upgrade.h)
IDLE_CASES := copy,splice,auto,uring,haproxy,nginx
perf-doc: deps bench-deps
	$(if $(BASELINE_REV),,$(error make perf-doc: no tag to take as the baseline (git fetch --tags, or BASELINE_REV=<revision>)))
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory perf-baseline REV=$(BASELINE_REV) BASELINE_DIR=$(B)/baseline
	$(B)/splicer bench --real --workers 1,2 --links loopback,veth1500 --cases $(PERF_CASES) \
		--baseline $(BASELINE_REV)=$(B)/baseline/splicer \
		--json $(B)/perf.json --chart doc/perf-results.svg --doc doc/perf-results.md $(ARGS)
	{ printf '\n## Memory per idle session (`splicer bench --idle`)\n\n'; \
	  $(B)/splicer bench --idle --cases $(IDLE_CASES) --json $(B)/perf-idle.json; } >> doc/perf-results.md
	{ printf '\n## Upgrade with sessions handed over (`splicer bench --upgrade`)\n\n'; \
	  $(B)/splicer bench --upgrade --json $(B)/perf-upgrade.json; } >> doc/perf-results.md

# The fault matrix's delay helper (tests/tools/nfq_delay.c, NFQUEUE).
$(B)/nfq_delay: tests/tools/nfq_delay.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -o $@ $< -lnetfilter_queue

# What a system call and an io_uring operation cost here (doc/performance.md).
$(B)/syscall-cost: tools/syscall-cost.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -o $@ $< -luring

# A wrapper that denies io_uring_setup through seccomp (tests/tools/no_uring.c).
$(B)/no_uring: tests/tools/no_uring.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -o $@ $<

TEST_ENV := SPLICER_BIN=$(B)/splicer SPLICER_ASAN_BIN=$(B)/asan/splicer \
	    SPLICER_NFQ_DELAY=$(B)/nfq_delay SPLICER_NO_URING=$(B)/no_uring \
	    SPLICER_FUZZ_DIR=$(B)/fuzz SPLICER_FUZZ_CORPUS=fuzz/corpus SPLICER_DEB=$(DEB) \
	    SPLICER_IMAGE_STATE=$(IMAGE_STATE)

# The image is built before the suite, not inside a timed test; where no
# container runtime can be installed or run, its tests are skipped with the
# reason (tools/image-build.sh --state). Chromium likewise: where it cannot
# be installed, the status page's browser test is skipped saying so.
test: deps peer-deps server-deps pkg-deps fleet-deps
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) all asan $(B)/tests $(B)/nfq_delay $(B)/no_uring $(B)/syscall-cost $(FUZZERS:%=$(B)/fuzz/fuzz_%) \
		$(DEB)
	$(Q)sh tools/deps.sh $(IMAGE_PKGS) || echo "  IMAGE   $(IMAGE_PKGS) could not be installed"
	$(Q)sh tools/deps.sh $(BROWSER_PKGS) || echo "  BROWSER $(BROWSER_PKGS) could not be installed"
	$(Q)sh tools/image-build.sh --state $(IMAGE_STATE) $(IMAGE)
	@rm -f $(B)/peer-table.txt
	$(TEST_ENV) SPLICER_PEER_TABLE=$(B)/peer-table.txt SPLICER_SUITE_OUT=$(B)/suite \
		sh tools/run-suite.sh $(B)/tests $(CRITERION_ARGS)

# make soak: 10 minutes of mixed traffic through one proxy, sampled into
# $(B)/soak-out/soak.csv and soak.png; fails on any error or growth.
SOAK_SECONDS ?= 600
$(B)/soak: tests/soak/test_soak.c tests/integration/harness.c $(LIB_OBJS) $(HDRS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(ALL_INC) -Itests/integration -o $@ tests/soak/test_soak.c \
		tests/integration/harness.c $(LIB_OBJS) -lcriterion $(LDLIBS)

soak: deps
	$(Q)$(MAKE) --no-print-directory all $(B)/soak
	@mkdir -p $(B)/soak-out
	SPLICER_BIN=$(B)/splicer SPLICER_SOAK_SECONDS=$(SOAK_SECONDS) SPLICER_SOAK_OUT=$(B)/soak-out \
		$(B)/soak --jobs 1 --timeout $$(( $(SOAK_SECONDS) + 300 ))

# make fleet: three instances behind a Linux ECMP router and five backends in
# network namespaces (tests/fleet/fleet.sh, doc/deployment.md), the VIP
# announced over BGP (BIRD 2 on the instances, FRR on the router, BFD):
# agreement, instances leaving, dying and joining, a backend removed, an
# upgrade, a crash, a rolling upgrade, a health-driven withdrawal, a speaker
# stopped; a table and a summary line. FLEET_ARGS=--short for the version make test runs.
.PHONY: fleet
fleet: fleet-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)sh tests/fleet/fleet.sh $(FLEET_ARGS) $(B)/splicer

# make install: the proxy, its man pages, the systemd unit with these paths
# filled in, an example config (never over an existing one), logrotate and
# sysctl.d snippets. PREFIX=/usr (a package) puts the unit in /lib/systemd/
# system, Debian's place for packaged units; any other PREFIX puts it in
# $(PREFIX)/lib/systemd/system, which systemd also reads for /usr/local. The
# config and logrotate live in /etc whatever the prefix (SYSCONFDIR).
SBINDIR      ?= $(PREFIX)/sbin
MANDIR       ?= $(PREFIX)/share/man
DATADIR      ?= $(PREFIX)/share/splicer
SYSCONFDIR   ?= /etc
UNITDIR      ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
SYSCTLDIR    ?= $(PREFIX)/lib/sysctl.d
LOGROTATEDIR ?= $(SYSCONFDIR)/logrotate.d
CONF         := $(DESTDIR)$(SYSCONFDIR)/splicer/splicer.conf
# splicer(8) and splicer.conf(5); splicer(1) while those are not written
MANPAGES     := doc/splicer.8 doc/splicer.conf.5
# what install writes, but for the config (see uninstall)
INSTALLED    := $(SBINDIR)/splicer $(DATADIR)/bench/haproxy.cfg $(DATADIR)/bench/nginx.conf \
		$(DATADIR)/bench/haproxy-sni.cfg $(DATADIR)/bench/splicer-sni.conf \
		$(DATADIR)/bench/nginx-rate.conf $(DATADIR)/bench/haproxy-idle.cfg $(DATADIR)/bench/splicer-upgrade.conf $(UNITDIR)/splicer.service $(UNITDIR)/splicer.socket $(SYSCTLDIR)/60-splicer.conf $(LOGROTATEDIR)/splicer \
		$(foreach m,$(MANPAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))

install: all
	install -D -m 755 $(B)/splicer $(DESTDIR)$(SBINDIR)/splicer
	install -D -m 644 bench/haproxy.cfg $(DESTDIR)$(DATADIR)/bench/haproxy.cfg
	install -D -m 644 bench/nginx.conf $(DESTDIR)$(DATADIR)/bench/nginx.conf
	install -D -m 644 bench/haproxy-sni.cfg $(DESTDIR)$(DATADIR)/bench/haproxy-sni.cfg
	install -D -m 644 bench/splicer-sni.conf $(DESTDIR)$(DATADIR)/bench/splicer-sni.conf
	install -D -m 644 bench/nginx-rate.conf $(DESTDIR)$(DATADIR)/bench/nginx-rate.conf
	install -D -m 644 bench/haproxy-idle.cfg $(DESTDIR)$(DATADIR)/bench/haproxy-idle.cfg
	install -D -m 644 bench/splicer-upgrade.conf $(DESTDIR)$(DATADIR)/bench/splicer-upgrade.conf
	for m in $(MANPAGES); do \
		install -D -m 644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/} || exit 1; done
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		contrib/splicer.service.in > $(DESTDIR)$(UNITDIR)/splicer.service
	chmod 644 $(DESTDIR)$(UNITDIR)/splicer.service
	install -m 644 contrib/splicer.socket $(DESTDIR)$(UNITDIR)/splicer.socket
	install -D -m 644 contrib/sysctl-splicer.conf $(DESTDIR)$(SYSCTLDIR)/60-splicer.conf
	install -D -m 644 contrib/logrotate-splicer $(DESTDIR)$(LOGROTATEDIR)/splicer
	@if [ -e $(CONF) ]; then \
		echo "  KEEP    $(CONF): it exists (the example is contrib/splicer.conf)"; \
	else \
		echo "install -D -m 644 contrib/splicer.conf $(CONF)"; \
		install -D -m 644 contrib/splicer.conf $(CONF); \
	fi
	@$(if $(DESTDIR),,echo "  NEXT    adduser --system --group --home /nonexistent --no-create-home splicer;" \
		"sysctl --system; systemctl daemon-reload; splicer check -c $(CONF);" \
		"systemctl enable --now splicer")

# Removes what install wrote. The config goes only while it is the example
# unchanged: one the user edited stays, and so does its directory.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rmdir $(DESTDIR)$(DATADIR)/bench $(DESTDIR)$(DATADIR) 2>/dev/null || true
	@if cmp -s contrib/splicer.conf $(CONF); then \
		echo "rm -f $(CONF)"; rm -f $(CONF); rmdir $(dir $(CONF)) 2>/dev/null; \
	elif [ -e $(CONF) ]; then \
		echo "  KEEP    $(CONF): it differs from the installed example (remove it by hand)"; \
	fi; true

# make deb: dpkg-buildpackage in a copy of the tree (its clean step runs
# `make clean`, which would empty this build/), then lintian at error level.
# It needs debian/control's Build-Depends (in DEB_PKGS: make deps) and the
# packaging tools (PKG_PKGS: make pkg-deps).
DEB_TREE := Makefile README.md bench bpf contrib debian doc src tools $(wildcard LICENSE CHANGELOG.md)
DEB_DEPS := Makefile $(SRCS) $(HDRS) $(wildcard bpf/* bench/* contrib/* debian/* debian/*/* doc/*)

pkg-deps:
	@sh tools/deps.sh $(PKG_PKGS)

deb: deps pkg-deps
	$(Q)$(MAKE) --no-print-directory $(DEB)

$(DEB): $(DEB_DEPS)
	@v=$$(dpkg-parsechangelog -S Version); [ "$$v" = "$(VERSION)" ] || \
		{ echo "debian/changelog is at $$v, the Makefile's VERSION at $(VERSION)" >&2; exit 1; }
	rm -rf $(B)/deb && mkdir -p $(B)/deb/splicer-$(VERSION)
	cp -a $(DEB_TREE) $(B)/deb/splicer-$(VERSION)/
	cd $(B)/deb/splicer-$(VERSION) && dpkg-buildpackage -b -us -uc -j2 > ../build.log 2>&1 || \
		{ tail -40 ../build.log; exit 1; }
	cp $(B)/deb/$(notdir $@) $@
	lintian --fail-on error $@ || { rm -f $@; exit 1; }

# make image: contrib/Containerfile built by podman (tools/podman.sh: the
# runc runtime, cgroupfs, ulimits within the host's) into splicer:VERSION and
# splicer:latest. Its FROM images, debian:bookworm and bookworm-slim, are
# made here from the host's Debian mirror when podman's storage lacks them
# (tools/image-base.sh: debootstrap, cached in build/image/); no registry is
# needed. Unchanged sources rebuild in seconds (podman's layer cache).
image-deps:
	@sh tools/deps.sh $(IMAGE_PKGS)

image: image-deps
	$(Q)sh tools/image-build.sh $(IMAGE)

# libFuzzer harnesses (clang): `make fuzz FUZZ_SECONDS=N` runs each for N s
# on a copy of its seed corpus in fuzz/corpus/, and fails on any finding.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -g -O1 -std=gnu11 $(ALL_INC) -DSPLICER_VERSION='"$(VERSION)"' \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZERS      := proxy_proto addr config http_req tls_hello
FUZZ_SRCS_proxy_proto := src/proto/proxy_proto.c src/proto/proxy_tlv.c
FUZZ_SRCS_addr        := src/lib/addr.c
FUZZ_SRCS_http_req    := src/proto/http_req.c
FUZZ_SRCS_tls_hello   := src/proto/tls_hello.c src/proto/sni_match.c
FUZZ_SRCS_config      := src/engine/engine_names.c src/ctl/config/config.c src/ctl/config/config_file.c \
			 src/ctl/config/config_env.c src/ctl/admin/activation.c src/lib/listener.c \
			 src/core/backend.c src/lib/units.c src/lib/addr.c src/lib/log.c src/ctl/sandbox/privs.c \
			 src/ctl/config/route_keys.c src/ctl/config/config_listen.c src/core/route_admit.c \
			 src/core/source_table.c src/lib/cidr.c src/proto/sni_match.c src/proto/tls_hello.c \
			 src/core/route_hist.c src/ctl/config/config_doc.c src/core/qsbr.c \
			 src/lib/timer.c src/proto/check_spec.c src/ctl/config/config_sockopt.c src/lib/sockopt.c \
			 src/ctl/config/config_pp.c src/proto/proxy_tlv.c src/lib/access_log.c src/lib/syslog_out.c \
			 src/lib/json_text.c

$(B)/fuzz/fuzz_%: fuzz/fuzz_%.c $(HDRS) $(SRCS)
	@mkdir -p $(@D)
	@echo "  FUZZ-CC $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRCS_$*) -linih -lm

fuzz: deps
	$(Q)$(MAKE) --no-print-directory $(FUZZERS:%=$(B)/fuzz/fuzz_%)
	@for f in $(FUZZERS); do \
		mkdir -p $(B)/fuzz/corpus-$$f && cp -n fuzz/corpus/$$f/* $(B)/fuzz/corpus-$$f/ 2>/dev/null; \
		echo "  FUZZ    $$f for $(FUZZ_SECONDS) s"; \
		$(B)/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 \
			-artifact_prefix=$(B)/fuzz/crash-$$f- $(B)/fuzz/corpus-$$f \
			> $(B)/fuzz/$$f.log 2>&1 || { tail -40 $(B)/fuzz/$$f.log; exit 1; }; \
		grep -E "^Done|stat::number_of_executed_units" $(B)/fuzz/$$f.log | tail -1; \
	done

clean:
	rm -rf $(B)
