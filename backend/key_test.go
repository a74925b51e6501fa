package backend

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{".cairn-state/.lock", true},
		{"dir/sub/file.json", true},
		{"spaces and ümlauts/?#%+&=", true},
		{strings.Repeat("k", MaxKeyLen), true},
		{"", false},
		{strings.Repeat("k", MaxKeyLen+1), false},
		{"../x", false},
		{"a/../b", false},
		{"a/./b", false},
		{"/abs", false},
		{"trailing/", false},
		{"a//b", false},
		{"nul\x00byte", false},
		{"tab\tchar", false},
		{"back\\slash", false},
		{"bad\xffutf8", false},
		{"..", false},
	} {
		err := ValidateKey(tc.key)
		if tc.ok && err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", tc.key, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", tc.key, err)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", ".cairn-state/"} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"../", "/", "a//"} {
		if err := ValidatePrefix(p); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
}
