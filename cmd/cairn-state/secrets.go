package main

import (
	"regexp"
	"strings"
)

// secretKeyRE finds age secret keys and plugin identities, in any case,
// anywhere in a string.
var secretKeyRE = regexp.MustCompile(`(?i)age-(secret-key|plugin-[a-z0-9._+-]+)-1[0-9a-z]+`)

// redactSecretKeys replaces every age secret key in s.
func redactSecretKeys(s string) string {
	return secretKeyRE.ReplaceAllString(s, "AGE-SECRET-KEY-…(redacted)")
}

// secretKind says what secret s looks like, or "" when it looks like none:
// an age secret key or plugin identity (in any case, quoted, or inside
// other text), or a PEM private key such as an SSH one.
func secretKind(s string) string {
	u := strings.ToUpper(s)
	switch {
	case strings.Contains(u, "AGE-SECRET-KEY"), strings.Contains(u, "AGE-PLUGIN-"):
		return "a secret key (AGE-SECRET-KEY-…)"
	case strings.Contains(u, "PRIVATE KEY"):
		return "a private key (-----BEGIN … PRIVATE KEY-----)"
	}
	return ""
}

// checkIdentityArg refuses an --identity value (or an entry of
// CAIRN_STATE_IDENTITY, as source says) that is a secret key itself rather
// than the path of a file holding one. The value is never repeated.
func checkIdentityArg(source, path string) error {
	if kind := secretKind(path); kind != "" {
		return usagef("%s looks like %s itself, not the path of a file holding one; write the key to a file (chmod 600) and give its path", source, kind)
	}
	return nil
}

// checkRecipientArg refuses a --recipient value (or an entry of
// CAIRN_STATE_RECIPIENTS) that is a secret, and one that is no public
// recipient at all, without repeating it: only a value that starts like a
// public recipient is quoted in later errors.
func checkRecipientArg(source, r string) error {
	if kind := secretKind(r); kind != "" {
		if strings.Contains(kind, "AGE-") {
			return usagef("%s looks like %s; give the public recipient, age1…; see `age-keygen -y`", source, kind)
		}
		return usagef("%s looks like %s; give the public key line, ssh-ed25519 … or ssh-rsa …; see `ssh-keygen -y`", source, kind)
	}
	if t := strings.TrimSpace(r); !strings.HasPrefix(t, "age1") && !strings.HasPrefix(t, "ssh-") {
		return usagef("%s is not a public recipient (want age1…, age1pq1…, ssh-ed25519 … or ssh-rsa …); the value is not shown in case it is secret", source)
	}
	return nil
}
