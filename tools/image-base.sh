#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/image-base.sh CACHE_DIR: makes sure podman's local storage holds the
# two base images contrib/Containerfile starts FROM, debian:bookworm and
# debian:bookworm-slim, without a container registry (none is reachable
# from the project's machines). `make image` runs it.
#
# What is already in storage is used as it is. Otherwise one Debian 12 root
# is bootstrapped, `debootstrap --variant=minbase` from the Debian mirror
# this host's apt uses (IMAGE_MIRROR=URL to choose another), and imported
# twice:
#   debian:bookworm        the minbase root, with the host mirror's Debian
#                          sources (main, -updates, -security where the host
#                          has them) for the build stage's apt-get;
#   debian:bookworm-slim   the same root without documentation (copyright
#                          files kept), manual pages, info and translations,
#                          and a dpkg rule that keeps those of packages
#                          installed later out: what Debian's own slim image
#                          is to its full one.
# One bootstrap serves both: a second would fetch and unpack the same
# packages again for a root that differs only in what slimming removes.
# The root's tarball is kept in CACHE_DIR (build/image), so importing again
# (after `podman rmi`) takes seconds. Needs root (debootstrap).
set -u
export LC_ALL=C
cache=${1:?usage: tools/image-base.sh CACHE_DIR}
suite=bookworm
full=debian:$suite
slim=debian:$suite-slim
tarball=$cache/$suite-minbase.tar

have() { podman image exists "$1" 2>/dev/null; }
have "$full" && have "$slim" && exit 0
mkdir -p "$cache" || exit 1

# The host's Debian mirror and security mirror, as apt knows them (its
# own parse of sources.list(.d), from the lists apt-get update fetched).
targets() {
	apt-get indextargets --format '$(ORIGIN) $(CODENAME) $(REPO_URI)' 2>/dev/null | sort -u
}
mirror=${IMAGE_MIRROR:-$(targets | awk '$1 == "Debian" && $2 !~ /-/ { print $3; exit }')}
security=$(targets | awk '$1 == "Debian" && $2 ~ /-security$/ { print $3; exit }')
[ -n "$mirror" ] || {
	echo "image-base: this host's apt has no Debian mirror (run apt-get update, or set IMAGE_MIRROR=URL)" >&2
	exit 1
}

# The minbase root's tarball, bootstrapped once.
bootstrap() {
	root=$cache/root
	rm -rf "$root" "$tarball.part"
	echo "  IMAGE   debootstrap --variant=minbase $suite from $mirror (once: a few minutes)"
	if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$cache/debootstrap.log" 2>&1; then
		tail -20 "$cache/debootstrap.log" >&2
		echo "image-base: debootstrap failed (whole log: $cache/debootstrap.log)" >&2
		return 1
	fi
	# the image's apt reads the same mirror; no downloaded lists or packages
	rm -f "$root/etc/apt/sources.list"
	{
		printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$mirror" "$suite" "$suite"
		printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
		[ -z "$security" ] ||
			printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
				"$security" "$suite"
	} > "$root/etc/apt/sources.list.d/debian.sources"
	rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb \
		"$root/dev/"* "$root/tmp/"* "$root/var/log/"*.log
	tar -C "$root" --numeric-owner --xattrs -cf "$tarball.part" . && mv "$tarball.part" "$tarball" &&
		rm -rf "$root"
}

# debian:bookworm-slim from the full root: Debian's slim image rules.
slim_tarball() {
	root=$cache/slim
	rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xf "$tarball" || return 1
	mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
	cat > "$root/etc/dpkg/dpkg.cfg.d/slim" <<-'EOF'
	# tools/image-base.sh: what the slim image leaves out, also of later installs
	path-exclude /usr/share/doc/*
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/man/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/locale/*
	path-include /usr/share/locale/locale.alias
	EOF
	find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$root/usr/share/man/"* "$root/usr/share/info/"*
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
	tar -C "$root" --numeric-owner --xattrs -cf "$cache/slim.tar" . && rm -rf "$root"
}

if [ ! -s "$tarball" ]; then
	command -v debootstrap >/dev/null 2>&1 || { echo "image-base: no debootstrap (make image-deps)" >&2; exit 1; }
	[ "$(id -u)" = 0 ] || { echo "image-base: debootstrap needs root" >&2; exit 1; }
	bootstrap || exit 1
fi
note="tools/image-base.sh: debootstrap --variant=minbase $suite from $mirror"
if ! have "$full"; then
	echo "  IMAGE   import $full"
	podman import -q -m "$note" -c 'CMD ["bash"]' "$tarball" "$full" >/dev/null || exit 1
fi
if ! have "$slim"; then
	echo "  IMAGE   import $slim"
	slim_tarball || exit 1
	podman import -q -m "$note, slimmed" -c 'CMD ["bash"]' "$cache/slim.tar" "$slim" >/dev/null || exit 1
	rm -f "$cache/slim.tar"
fi
