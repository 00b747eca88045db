package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Role is what a bearer token lets its caller do, through a Policy.
type Role string

// The roles. RoleAdmin may call every method a Policy names; the others
// only the methods that list them.
const (
	RoleActor   Role = "actor"
	RoleLearner Role = "learner"
	RoleAdmin   Role = "admin"
)

// Roles lists the roles, least privileged first.
var Roles = []Role{RoleActor, RoleLearner, RoleAdmin}

// Validate returns nil for a known role, else an error naming the roles.
func (r Role) Validate() error {
	for _, k := range Roles {
		if r == k {
			return nil
		}
	}
	return fmt.Errorf("auth: unknown role %q (want actor, learner or admin)", string(r))
}

// MinTokenLen is the shortest token Tokens accepts: 16 characters, so a
// guessable word is an error. Tokens from `openssl rand -hex 32` or
// NewToken are far longer.
const MinTokenLen = 16

// Tokens maps bearer tokens to roles. It keeps only SHA-256 digests of the
// tokens, and Lookup compares a presented token's digest with every
// configured digest in constant time, so neither the time taken nor an
// early exit tells which token (or how long a token) is configured.
//
// Add and Load must finish before the Tokens is shared; after that Lookup
// is safe for concurrent use. The zero value holds no tokens.
type Tokens struct {
	digests [][sha256.Size]byte
	roles   []Role
}

// Add configures token for role. The token must be at least MinTokenLen
// printable ASCII characters without spaces, and not already configured
// (for any role). Cost: one hash and one compare per configured token.
func (t *Tokens) Add(role Role, token string) error {
	if err := role.Validate(); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return fmt.Errorf("auth: %s token %w", role, err)
	}
	if r, ok := t.Lookup(token); ok {
		return fmt.Errorf("auth: the same %s token is configured twice (already for %s)", role, r)
	}
	t.digests = append(t.digests, sha256.Sum256([]byte(token)))
	t.roles = append(t.roles, role)
	return nil
}

// checkToken returns an error, to follow "token", when token is too short
// or holds anything but printable ASCII without spaces.
func checkToken(token string) error {
	if len(token) < MinTokenLen {
		return fmt.Errorf("has %d characters, want at least %d", len(token), MinTokenLen)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("character %d is not printable ASCII without spaces", i+1)
		}
	}
	return nil
}

// Len returns the number of configured tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.digests)
}

// Lookup returns the role of token, comparing its SHA-256 digest with every
// configured digest (crypto/subtle, no early exit). Cost: one hash of the
// token and one 32-byte compare per configured token. Safe for concurrent
// use once no Add runs.
func (t *Tokens) Lookup(token string) (Role, bool) {
	if t == nil {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	found, at := 0, 0
	for i := range t.digests {
		eq := subtle.ConstantTimeCompare(t.digests[i][:], d[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found == 0 {
		return "", false
	}
	return t.roles[at], true
}

// ParseTokens reads tokens as "role token" lines: blank lines and lines
// whose first non-space character is '#' are skipped, the role and token
// are separated by spaces or tabs. Errors give the line number but never
// the token. Cost: linear in the input.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := new(Tokens)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("auth: line %d: want \"role token\", got %d fields", n, len(f))
		}
		if err := t.Add(Role(f[0]), f[1]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return t, nil
}

// LoadTokens reads a tokens file as ParseTokens does. A file that others
// may read is refused: tokens are secrets. The mode must be 0600 or
// narrower, except that a file owned by root and read by another user may
// also be group-readable (0640 or narrower: no group write, nothing for
// others), as PostgreSQL allows for its key file: that is how Kubernetes
// mounts a Secret for a pod running as a non-root user with an fsGroup
// (root:fsGroup, 0440). An empty file gives empty Tokens. Cost: one file
// read.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: tokens: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth: tokens: %w", err)
	}
	owner, known := fileOwner(st)
	if !tokensModeOK(st.Mode().Perm(), owner, known, os.Geteuid()) {
		return nil, fmt.Errorf("auth: tokens file %s has mode %v: others may read it (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// tokensModeOK reports whether a tokens file with permissions perm, owned
// by the user owner (known false: the system does not say), may be read by
// the process whose effective user is euid: 0600 or narrower, or 0640 or
// narrower for a root-owned file another user reads (through its group).
func tokensModeOK(perm os.FileMode, owner int, known bool, euid int) bool {
	if perm&0o077 == 0 {
		return true
	}
	return known && owner == 0 && euid != 0 && perm&0o037 == 0
}

// errNoMethod is returned by Policy.Validate for an ill-formed name.
var errNoMethod = errors.New(`want "/package.Service/Method"`)

// Policy maps each gRPC full method name ("/apex.replay.v1.Replay/Insert")
// to the roles allowed to call it; RoleAdmin is allowed every named method
// whether listed or not. A method the policy does not name is denied to
// every role, except the methods of the standard health service, which are
// open to every caller. The server that registers a service supplies its
// policy; a Policy is read-only once handed to NewAuthorizer.
type Policy map[string][]Role

// Validate checks every method name's form and every role.
func (p Policy) Validate() error {
	for m, roles := range p {
		svc, meth, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		if !strings.HasPrefix(m, "/") || !ok || svc == "" || meth == "" || strings.Contains(meth, "/") {
			return fmt.Errorf("auth: policy method %q: %w", m, errNoMethod)
		}
		for _, r := range roles {
			if err := r.Validate(); err != nil {
				return fmt.Errorf("policy method %s: %w", m, err)
			}
		}
	}
	return nil
}

// NewToken returns a fresh token: 32 bytes from crypto/rand, hex-encoded
// (64 characters).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auth: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
