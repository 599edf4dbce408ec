package mesh

import (
	"strconv"
	"strings"
)

// oneLineError prints its cause on one line: libp2p's dial and start
// errors list one line per address or module, which breaks a log record
// or a command's one-line error in pieces.
type oneLineError struct{ err error }

func (e oneLineError) Error() string { return flatten(e.err.Error()) }
func (e oneLineError) Unwrap() error { return e.err }

// OneLine returns err printing on one line (nil for nil).
func OneLine(err error) error {
	if err == nil || !strings.ContainsAny(err.Error(), "\r\n") {
		return err
	}
	return oneLineError{err}
}

// flatten joins the lines of s with "; " (a space after a colon), dropping blank lines and the
// bullets libp2p puts before each dial error.
func flatten(s string) string {
	var b strings.Builder
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "* "))
		switch {
		case l == "":
			continue
		case b.Len() == 0:
		case strings.HasSuffix(b.String(), ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// Sig4 rounds v to 4 significant digits, so a log line shows 0.6931, not
// 0.6931471805599453.
func Sig4(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if err != nil {
		return v
	}
	return r
}
