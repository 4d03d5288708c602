package sse

import "unicode/utf8"

// The WHATWG "UTF-8 decode" replaces each maximal subpart of an ill-formed
// sequence with one U+FFFD; Go's utf8.DecodeRune and strings.ToValidUTF8
// replace one per byte or one per run, so that case is done here. Decoding
// commutes with splitting on CR, LF and ':' (ASCII bytes never occur inside
// a well-formed sequence), so the parser splits raw bytes and decodes values.

// decodeString returns b decoded as text. Well-formed input is converted
// with one allocation and no copy beyond string(b).
func decodeString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendDecoded(make([]byte, 0, len(b)+8), b))
}

// appendDecoded appends the text of b to dst, with U+FFFD for every maximal
// subpart of an ill-formed sequence.
func appendDecoded(dst, b []byte) []byte {
	for len(b) > 0 {
		if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return dst
}

// maximalSubpart returns the length of the ill-formed sequence at the start
// of b: its first byte, and the bytes after it that could still have been
// part of a well-formed sequence (the Encoding standard's lower and upper
// boundaries). It is at least 1.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	need := 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(b) && b[i] >= lo && b[i] <= hi; i++ {
		lo, hi = 0x80, 0xBF
	}
	return i
}
