package fs

// cmdScanner follows a command's bytes as they arrive, so that a command
// is known complete when its JSON object closes and bytes that cannot
// continue one JSON object on one line are refused on the piece that
// carries them. It checks the structure (brackets, strings, escapes, the
// bytes allowed between tokens); the command's decoder checks the rest.
type cmdScanner struct {
	n       int64  // bytes seen
	end     int64  // the command's bytes, once done
	stack   []byte // open brackets
	started bool
	done    bool
	inStr   bool
	esc     bool
	hex     int // hex digits still due in a \u escape
}

// maxDepth bounds a command's nesting.
const maxDepth = 1000

func (s *cmdScanner) feed(p []byte) (complete bool, err error) {
	for _, c := range p {
		at := s.n
		s.n++
		switch {
		case s.done:
			if !isSpace(c) {
				return false, badf("one command per write: %q follows the end of the command's JSON object (byte %d)", c, at)
			}
		case s.inStr:
			switch {
			case s.hex > 0:
				if !isHex(c) {
					return false, badf("byte %d: %q in a \\u escape", at, c)
				}
				s.hex--
			case s.esc:
				s.esc = false
				switch c {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					s.hex = 4
				default:
					return false, badf("byte %d: invalid escape \\%c", at, c)
				}
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
			case c == '\n':
				return false, badf("byte %d: the line ended inside a string (a command is one JSON object on one line)", at)
			case c < 0x20:
				return false, badf("byte %d: control byte %q inside a string", at, c)
			}
		case !s.started:
			switch {
			case c == '\n':
				return false, badf("empty command (a command is one JSON object on one line)")
			case isSpace(c):
			case c != '{':
				return false, badf("a command is a JSON object, beginning with '{', not %q", c)
			default:
				s.started = true
				s.stack = append(s.stack, c)
			}
		default:
			switch c {
			case '{', '[':
				if len(s.stack) >= maxDepth {
					return false, badf("byte %d: nested deeper than %d", at, maxDepth)
				}
				s.stack = append(s.stack, c)
			case '}', ']':
				open := byte('{')
				if c == ']' {
					open = '['
				}
				if s.stack[len(s.stack)-1] != open {
					return false, badf("byte %d: %q closes %q", at, c, s.stack[len(s.stack)-1])
				}
				s.stack = s.stack[:len(s.stack)-1]
				if len(s.stack) == 0 {
					s.done, s.end = true, s.n
				}
			case '"':
				s.inStr = true
			case '\n':
				return false, badf("byte %d: the line ended before the command's JSON object did (a command is one JSON object on one line)", at)
			case ' ', '\t', '\r', ',', ':':
			default:
				if !isLiteral(c) {
					return false, badf("byte %d: %q cannot appear in JSON outside a string", at, c)
				}
			}
		}
	}
	return s.done, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isLiteral: a byte of a number, true, false or null.
func isLiteral(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}
