package main

import (
	"strings"

	"github.com/cairnhq/state/internal/secret"
)

// checkIdentityArg refuses an --identity value (or an entry of
// CAIRN_STATE_IDENTITY, as source says) that is a secret itself rather
// than the path of a file holding one. The value is never repeated.
func checkIdentityArg(source, path string) error {
	if kind := secret.Detect(path); kind != "" {
		return usagef("%s looks like %s itself, not the path of a file holding one; write the key to a file (chmod 600) and give its path", source, kind)
	}
	return nil
}

// checkRecipientArg refuses a --recipient value (or an entry of
// CAIRN_STATE_RECIPIENTS) that is a secret, and one that is no public
// recipient at all, without repeating it: only a value that starts like a
// public recipient is quoted in later errors.
func checkRecipientArg(source, r string) error {
	switch kind := secret.Detect(r); kind {
	case "":
	case secret.AgeKey, secret.AgeHybridKey, secret.AgePluginKey:
		return usagef("%s looks like %s; give the public recipient, age1…; see `age-keygen -y`", source, kind)
	case secret.PrivateKey:
		return usagef("%s looks like %s; give the public key line, ssh-ed25519 … or ssh-rsa …; see `ssh-keygen -y`", source, kind)
	default:
		return usagef("%s looks like %s; give a public recipient (age1…, ssh-ed25519 …)", source, kind)
	}
	if t := strings.TrimSpace(r); !strings.HasPrefix(t, "age1") && !strings.HasPrefix(t, "ssh-") {
		return usagef("%s is not a public recipient (want age1…, age1pq1…, ssh-ed25519 … or ssh-rsa …); the value is not shown in case it is secret", source)
	}
	return nil
}
