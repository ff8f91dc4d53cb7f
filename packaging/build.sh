#!/usr/bin/env bash
# Builds Pith's release artifacts into dist/: for each architecture a
# static binary (CGO_ENABLED=0, version stamped), a tarball and a .deb.
#
#   packaging/build.sh                 # linux amd64, arm64 and armv7 (GOARM=7)
#   packaging/build.sh amd64           # only some of them
#   PITH_VERSION=v1.2.3 packaging/build.sh
#   PITH_TRIMPATH=0 packaging/build.sh amd64   # reuse the test build cache (CI)
#
# The version defaults to `git describe` of a v* tag, else
# v0.0.0-git<commit time>-<commit>; "-dirty" marks uncommitted changes.
# The .deb is made by nfpm, run as a tool (it never enters go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."

NFPM_MOD=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.44.0
DIST=dist

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 armv7)

# The version stamped into the binary, and the same in Debian's syntax.
version=${PITH_VERSION:-}
if [ -z "$version" ]; then
	version=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || true)
fi
if [ -z "$version" ]; then
	when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || date -u +%Y%m%d%H%M%S)
	rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
	version="v0.0.0-git${when}-${rev}"
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		version="${version}-dirty"
	fi
fi
case "$version" in
v[0-9]*) ;;
*) echo "build.sh: version $version does not start with v and a digit" >&2; exit 1 ;;
esac
# v1.2.3 -> 1.2.3; v1.2.3-4-gabc -> 1.2.3+git4.gabc (after 1.2.3);
# v0.0.0-git2026...-abc -> 0.0.0~git2026....abc (before any release).
debver=${version#v}
debver=${debver//-dirty/+dirty}
if [[ $debver =~ ^([0-9][0-9.]*)-([0-9]+)-g([0-9a-f]+)(.*)$ ]]; then
	debver="${BASH_REMATCH[1]}+git${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}${BASH_REMATCH[4]}"
elif [[ $debver =~ ^([0-9][0-9.]*)-(.*)$ ]]; then
	debver="${BASH_REMATCH[1]}~${BASH_REMATCH[2]//-/.}"
fi

# One timestamp for every file in the archives: the commit's, so that a
# rebuild of the same commit gives the same tarballs.
mtime=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

# -trimpath keeps the build machine's paths out of release binaries; it
# also makes every package compile anew, which CI (right after go test)
# can skip.
trimpath=-trimpath
[ "${PITH_TRIMPATH:-1}" != 0 ] || trimpath=

mkdir -p "$DIST"

# The packaged config: a short working start (packaging/pith.toml); the
# documented sample goes to /usr/share/doc/pith.
conf="$DIST/pith.toml"
cp packaging/pith.toml "$conf"

echo "version $version (deb $debver)"
for a in "${arches[@]}"; do
	goarm=
	case "$a" in
	amd64) goarch=amd64 debarch=amd64 ;;
	arm64) goarch=arm64 debarch=arm64 ;;
	armv7 | arm) a=armv7 goarch=arm goarm=7 debarch=armhf ;;
	*) echo "build.sh: unknown architecture $a (want amd64, arm64 or armv7)" >&2; exit 1 ;;
	esac
	name="pith_${version#v}_linux_${a}"
	out="$DIST/$name"
	rm -rf "$out"
	mkdir -p "$out"

	echo "== $a: go build"
	CGO_ENABLED=0 GOOS=linux GOARCH=$goarch GOARM=$goarm \
		go build $trimpath -ldflags "-s -w -X main.version=$version" -o "$out/pith" ./cmd/pith

	echo "== $a: tarball"
	cp pith.example.toml LICENSE README.md packaging/pith.service "$out/"
	cp docs/install.md "$out/INSTALL.md"
	tar -C "$DIST" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
		-czf "$out.tar.gz" "$name"

	echo "== $a: deb"
	PITH_DEB_ARCH=$debarch PITH_DEB_VERSION=$debver PITH_BIN="$out/pith" PITH_CONFIG="$conf" \
		SOURCE_DATE_EPOCH=$mtime PITH_MAINTAINER="${PITH_MAINTAINER:-Pith developers <pith@pith-historian.invalid>}" \
		go run "$NFPM_MOD" package --config packaging/nfpm.yaml --packager deb \
		--target "$DIST/pith_${debver}_${debarch}.deb"
done
ls -l "$DIST"/*.tar.gz "$DIST"/*.deb
