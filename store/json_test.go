package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/store"
)

type settingsV1 struct {
	Theme string `json:"theme"`
}

type settingsV2 struct {
	Theme    string `json:"theme"`
	FontSize int    `json:"font_size"`
}

func TestPutGetJSON_RoundTripKeepsSchema(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	info, err := store.PutJSON(ctx, s, "settings", 2, settingsV2{Theme: "dark", FontSize: 14}, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := store.GetJSON[settingsV2](ctx, s, "settings")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Schema != 2 || doc.Value != (settingsV2{"dark", 14}) || !sameObject(doc.Info, info) {
		t.Fatalf("GetJSON = %+v, want schema 2, the value and the Put's info", doc)
	}
}

func TestGetJSON_OldSchema_ReaderCanTellAndConvert(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	if _, err := store.PutJSON(ctx, s, "settings", 1, settingsV1{Theme: "light"}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	doc, err := store.GetJSON[settingsV2](ctx, s, "settings")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Schema != 1 {
		t.Fatalf("schema %d, want 1 (written by the old version)", doc.Schema)
	}
	if doc.Value.Theme != "light" || doc.Value.FontSize != 0 {
		t.Errorf("decoded %+v from a v1 value", doc.Value)
	}
}

func TestGetJSON_NotAJSONDoc_ErrBadJSON(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	for name, raw := range map[string]string{
		"not-json":  "plain bytes",
		"no-schema": `{"theme":"dark"}`,
		"bad-type":  `{"schema":1,"value":"a string"}`,
	} {
		if _, err := s.Put(ctx, name, []byte(raw), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := store.GetJSON[settingsV1](ctx, s, name)
		if !errors.Is(err, store.ErrBadJSON) || !strings.Contains(err.Error(), name) {
			t.Errorf("GetJSON(%s) = %v, want ErrBadJSON naming the object", name, err)
		}
	}
	if _, err := store.GetJSON[settingsV1](ctx, s, "absent"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetJSON(absent) = %v, want ErrNotFound", err)
	}
	if _, err := store.PutJSON(ctx, s, "zero", 0, settingsV1{}, store.PutOptions{}); err == nil {
		t.Error("PutJSON with schema 0 succeeded, want a refusal")
	}
}

func TestUpdateJSON_ConcurrentIncrements_AllCounted(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{UpdateAttempts: 1000})
	type boots struct{ N int }
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			for range 4 {
				_, err := store.UpdateJSON(ctx, s, "boots", 1, func(old store.Doc[boots], exists bool) (boots, error) {
					if exists != (old.Schema == 1) {
						t.Errorf("exists %v with schema %d", exists, old.Schema)
					}
					return boots{N: old.Value.N + 1}, nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	doc, err := store.GetJSON[boots](ctx, s, "boots")
	if err != nil || doc.Value.N != 20 {
		t.Fatalf("boots = %+v, %v; want 20", doc, err)
	}
}

// GetJSON's errors reach logs and the migration record: they must not
// quote the stored value (issue #14).
func TestGetJSON_DecodeErrors_QuoteNoPlaintext(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	type typed struct {
		N    int       `json:"n"`
		When time.Time `json:"when"`
		Tags []string  `json:"tags"`
	}
	const secret = "hunter2-S3CR3T"
	for name, raw := range map[string]string{
		"syntax":       `{"schema":1,"value":` + secret + `}`,
		"syntax-inner": `{"schema":1,"value":{"n": 1` + secret + `}}`,
		"type-number":  `{"schema":1,"value":{"n": "` + secret + `"}}`,
		"type-big":     `{"schema":1,"value":{"n": 1` + strings.Repeat("9", 40) + `}}`,
		"time":         `{"schema":1,"value":{"when": "` + secret + `"}}`,
		"array":        `{"schema":1,"value":{"tags": "` + secret + `"}}`,
		"truncated":    `{"schema":1,"value":{"n": "` + secret,
		"not-json":     secret,
	} {
		if _, err := s.Put(ctx, "v/"+name, []byte(raw), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := store.GetJSON[typed](ctx, s, "v/"+name)
		if !errors.Is(err, store.ErrBadJSON) {
			t.Errorf("%s: %v, want ErrBadJSON", name, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "S3CR3T") || strings.Contains(msg, "999") {
			t.Errorf("%s: the error quotes the value: %s", name, msg)
		} else {
			t.Logf("%s: %s", name, msg)
		}
	}
}
