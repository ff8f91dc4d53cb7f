// Package packaging holds no code: this folder has the release packaging
// (build.sh, the nfpm configuration, the systemd unit and the Debian
// maintainer scripts), and deb_test.go checks a built .deb.
package packaging
