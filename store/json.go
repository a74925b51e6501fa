package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// Doc is a JSON state value with the application's schema version kept
// beside it, so that a reader can tell a value written by an older (or
// newer) version of the application from a current one and convert it.
type Doc[T any] struct {
	// Schema is the application's version of T's layout, at least 1. It
	// is chosen by the writer (PutJSON's schema argument).
	Schema int
	// Value is the decoded value.
	Value T
	// Info describes the stored object; Info.Version is what a later
	// conditional PutJSON passes as PutOptions.IfVersion.
	Info Info
}

// jsonDoc is the stored form: {"schema":N,"value":...}.
type jsonDoc struct {
	Schema *int            `json:"schema"`
	Value  json.RawMessage `json:"value"`
}

// PutJSON encodes v as JSON together with its schema version (at least 1)
// and writes it with Put.
func PutJSON[T any](ctx context.Context, s *Store, name string, schema int, v T, opts PutOptions) (Info, error) {
	data, err := encodeJSON(name, schema, v)
	if err != nil {
		return Info{}, err
	}
	return s.Put(ctx, name, data, opts)
}

// GetJSON reads name with Get and decodes a value written by PutJSON. It
// fails with ErrNotFound when the object is absent, and with ErrBadJSON when
// the value is not such a document or does not decode into T. Unknown JSON
// fields are ignored, so a reader can look at Schema and convert.
func GetJSON[T any](ctx context.Context, s *Store, name string) (Doc[T], error) {
	data, info, err := s.Get(ctx, name)
	if err != nil {
		return Doc[T]{}, err
	}
	d, err := decodeJSON[T](name, data)
	if err != nil {
		return Doc[T]{}, err
	}
	d.Info = info
	return d, nil
}

// UpdateJSON is Update for values written by PutJSON: fn receives the
// current document (exists is false and old the zero Doc when absent) and
// returns the new value, written with schema. Like Update, it is atomic on
// backends with conditional writes and fn may run more than once.
func UpdateJSON[T any](ctx context.Context, s *Store, name string, schema int, fn func(old Doc[T], exists bool) (T, error)) (Doc[T], error) {
	var next T
	info, err := s.Update(ctx, name, func(old []byte, exists bool) ([]byte, error) {
		var d Doc[T]
		if exists {
			var err error
			if d, err = decodeJSON[T](name, old); err != nil {
				return nil, err
			}
		}
		v, err := fn(d, exists)
		if err != nil {
			return nil, err
		}
		next = v
		return encodeJSON(name, schema, v)
	})
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Schema: schema, Value: next, Info: info}, nil
}

func encodeJSON[T any](name string, schema int, v T) ([]byte, error) {
	if schema < 1 {
		return nil, fmt.Errorf("store: put json %q: schema version %d, must be at least 1", name, schema)
	}
	value, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: put json %q: %w", name, err)
	}
	return json.Marshal(jsonDoc{Schema: &schema, Value: value})
}

func decodeJSON[T any](name string, data []byte) (Doc[T], error) {
	var raw jsonDoc
	if err := json.Unmarshal(data, &raw); err != nil {
		return Doc[T]{}, fmt.Errorf("store: get json %q: %w: %s", name, ErrBadJSON, describeJSONError(err))
	}
	if raw.Schema == nil || raw.Value == nil {
		return Doc[T]{}, fmt.Errorf("store: get json %q: %w: no schema or value field (not written by PutJSON?)", name, ErrBadJSON)
	}
	d := Doc[T]{Schema: *raw.Schema}
	if !bytes.Equal(raw.Value, []byte("null")) {
		if err := json.Unmarshal(raw.Value, &d.Value); err != nil {
			return Doc[T]{}, fmt.Errorf("store: get json %q (schema %d): %w: decoding into %s: %s", name, d.Schema, ErrBadJSON, reflect.TypeFor[T](), describeJSONError(err))
		}
	}
	return d, nil
}

// describeJSONError says what is wrong with a JSON value without quoting
// any of it: encoding/json's own messages quote characters, numbers and,
// through UnmarshalJSON methods (time.Time's), whole strings of the value,
// which may be secret (issue #14). Field paths and Go types are the
// schema's, not the value's, and are kept.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON near byte %d", syn.Offset)
	case errors.As(err, &typ):
		at := ""
		if typ.Field != "" {
			at = " at field " + typ.Field
		}
		kind, _, _ := cutSpace(typ.Value) // "number 1e400" → "number"
		return fmt.Sprintf("a JSON %s%s where %s was expected", kind, at, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON value ends early"
	default:
		return fmt.Sprintf("the value does not decode (%T)", err)
	}
}

// cutSpace splits s at its first space.
func cutSpace(s string) (before, after string, found bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
