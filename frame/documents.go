package frame

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DecodeStrict decodes one JSON value into v: unknown fields and a key
// given twice in one object are errors, numbers keep every digit, and
// nothing may follow the value.
func DecodeStrict(data []byte, v any) error {
	if err := uniqueKeys(data); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// uniqueKeys refuses a JSON object that gives a key twice (a decoder would
// keep the last silently). Malformed JSON is left to the decoder to
// report.
func uniqueKeys(data []byte) error {
	type level struct {
		keys      map[string]bool // nil in an array
		expectKey bool
	}
	var stack []level
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or malformed: the decoder says which
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.keys != nil {
				top.expectKey = true // the value now opening is the key's
			}
			l := level{}
			if tok == json.Delim('{') {
				l = level{keys: map[string]bool{}, expectKey: true}
			}
			stack = append(stack, l)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top == nil || top.keys == nil {
			continue
		}
		if top.expectKey {
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("key %q is given twice in one object", k)
			}
			top.keys[k] = true
		}
		top.expectKey = !top.expectKey
	}
}
