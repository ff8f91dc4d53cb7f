package model

import (
	"strings"
	"unicode/utf8"
)

// textEllipsis ends a text value FitText had to cut.
const textEllipsis = "…"

// FitText makes a device's string a text value CheckText accepts, for the
// drivers that read strings (OPC UA, Sparkplug B), which must store what
// the device says rather than refuse it:
//   - each line break (CR LF, CR or LF) becomes one space, so a multi-line
//     message stays one line with its words apart;
//   - each invalid UTF-8 sequence becomes U+FFFD;
//   - text longer than MaxTextLen bytes is cut at a character boundary and
//     ends with "…", MaxTextLen bytes in all.
//
// cut reports the last two, where the stored text is no longer the
// device's: the drivers then store it with quality uncertain. A line break
// made a space is not a cut.
func FitText(s string) (text string, cut bool) {
	if CheckText(s) == nil {
		return s, false
	}
	if !utf8.ValidString(s) {
		s, cut = strings.ToValidUTF8(s, "\uFFFD"), true
	}
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	}
	if len(s) > MaxTextLen {
		n := MaxTextLen - len(textEllipsis)
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s, cut = s[:n]+textEllipsis, true
	}
	return s, cut
}
