package wire

// The patterns below are the reference's validators, byte for byte; where
// they differ from the contract's JSON Schema the reference wins
// (FORMAT.md, first paragraph).

// ValidEntryID reports whether id matches ^[A-Za-z0-9_-]{1,128}$.
func ValidEntryID(id string) bool { return validEntryID(id) }

// validEntryID is ValidEntryID for a string or its bytes (the index-row
// scan checks ids before it makes strings of them).
func validEntryID[T ~string | ~[]byte](id T) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidCorrelationID reports whether id matches ^[A-Za-z0-9._:-]{8,128}$.
func ValidCorrelationID(id string) bool {
	if len(id) < 8 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// ValidSHA256Hex reports whether s is 64 lower-case hex digits (the
// contract's hex64: payloadSha256, chainHash, manifestHash).
func ValidSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidCRC32C reports whether s is 8 upper-case hex digits.
func ValidCRC32C(s string) bool { return validCRC32C(s) }

func validCRC32C[T ~string | ~[]byte](s T) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// validAnyCaseHex64 is the source-state fingerprint check, which (unlike
// every other digest check) accepts upper-case digits.
func validAnyCaseHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// ValidUUID reports whether s parses as a UUID the way the reference's uuid
// crate parses it (Uuid::parse_str): 32 hex digits; or hyphenated 8-4-4-4-12,
// bare, in braces, or after "urn:uuid:" (lower-case prefix); any case.
func ValidUUID(s string) bool {
	switch {
	case len(s) == 32:
		for i := 0; i < 32; i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	case len(s) == 36:
		return hyphenatedUUID(s)
	case len(s) == 38 && s[0] == '{' && s[37] == '}':
		return hyphenatedUUID(s[1:37])
	case len(s) == 45 && s[:9] == "urn:uuid:":
		return hyphenatedUUID(s[9:])
	}
	return false
}

func hyphenatedUUID(s string) bool {
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// ValidRFC3339 reports whether s is accepted by the reference's
// chrono::DateTime::parse_from_rfc3339: YYYY-MM-DD, then 'T', 't' or ' ',
// hh:mm:ss (second 60 allowed as a leap second), an optional '.' and one or
// more digits, then 'Z', 'z' or an offset ±hh:mm (the minus also as U+2212)
// of at most 23:59; a real calendar date; nothing after.
func ValidRFC3339(s string) bool {
	num := func(i, n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for k := i; k < i+n; k++ {
			c := s[k]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	at := func(i int, c byte) bool { return i < len(s) && s[i] == c }
	year, ok := num(0, 4)
	if !ok || !at(4, '-') {
		return false
	}
	month, ok := num(5, 2)
	if !ok || !at(7, '-') {
		return false
	}
	day, ok := num(8, 2)
	if !ok || len(s) < 11 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') {
		return false
	}
	hour, ok := num(11, 2)
	if !ok || !at(13, ':') {
		return false
	}
	minute, ok := num(14, 2)
	if !ok || !at(16, ':') {
		return false
	}
	second, ok := num(17, 2)
	if !ok {
		return false
	}
	i := 19
	if at(i, '.') {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	switch {
	case at(i, 'Z') || at(i, 'z'):
		i++
	default:
		switch {
		case at(i, '+') || at(i, '-'):
			i++
		case len(s) >= i+3 && s[i:i+3] == "\u2212":
			i += 3
		default:
			return false
		}
		oh, ok := num(i, 2)
		if !ok || !at(i+2, ':') {
			return false
		}
		om, ok := num(i+3, 2)
		if !ok || oh > 23 || om > 59 {
			return false
		}
		i += 5
	}
	if i != len(s) {
		return false
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return false
	}
	return hour <= 23 && minute <= 59 && second <= 60
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
