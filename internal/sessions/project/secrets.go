package project

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// secretHint ends every refusal of something that looks like a secret.
const secretHint = "pass secrets with `paddock secret set` and --secret, never in a checked-in file"

// envName is a variable name a shell can set.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envRefusal says why a variable of env is refused, or "" if it is not:
// its name is not a shell variable's, paddock sets it, it is named like a
// secret, or its value looks like a credential. The reason names the rule
// that matched and never the value.
func envRefusal(name, value string) string {
	if len(name) > 128 || !envName.MatchString(name) {
		return "not a variable name: use letters, digits and '_', starting with a letter or '_', at most 128"
	}
	if why := paddockSets(name); why != "" {
		return why
	}
	if word := secretNameWord(name); word != "" {
		return fmt.Sprintf("named like a secret (%s); %s", word, secretHint)
	}
	if len(value) > MaxValue {
		return fmt.Sprintf("the value is %d bytes, more than %d", len(value), MaxValue)
	}
	if strings.ContainsRune(value, 0) {
		return "the value holds a NUL character, which no environment can carry"
	}
	if what := credentialShaped(value); what != "" {
		return fmt.Sprintf("the value looks like %s; %s", what, secretHint)
	}
	return ""
}

// valueRefusal says why a string that runs in the box (the setup command)
// is refused for holding what looks like a credential, or "".
func valueRefusal(s string) string {
	if what := credentialShaped(s); what != "" {
		return fmt.Sprintf("holds what looks like %s; %s", what, secretHint)
	}
	return ""
}

// paddockOwn are variables paddock sets in every box (claudecode.Env) or
// that make the box's network and TLS path, by upper-case name, with why.
var paddockOwn = map[string]string{
	"PATH": "the box's PATH", "HOME": "the box's home", "USER": "the box's user", "LANG": "the box's locale",
	"TERM": "the terminal", "IS_SANDBOX": "the sandbox marker", "DISABLE_AUTOUPDATER": "claude's updates",
	"DISABLE_TELEMETRY": "claude's traffic", "DISABLE_ERROR_REPORTING": "claude's traffic", "DO_NOT_TRACK": "claude's traffic",
	"HTTP_PROXY": "the box's network path, which is its egress proxy", "HTTPS_PROXY": "the box's network path, which is its egress proxy",
	"NO_PROXY": "the box's network path, which is its egress proxy", "ALL_PROXY": "the box's network path, which is its egress proxy",
	"SSL_CERT_FILE": "the box's TLS trust", "SSL_CERT_DIR": "the box's TLS trust",
	"NODE_EXTRA_CA_CERTS": "the box's TLS trust", "NODE_TLS_REJECT_UNAUTHORIZED": "the box's TLS trust",
}

// paddockPrefixes are families of variables paddock sets or keeps.
var paddockPrefixes = []struct{ prefix, why string }{
	{"ANTHROPIC_", "they choose claude's API and credential"},
	{"CLAUDE_", "they hold claude's configuration, credential and settings"},
	{"PADDOCK_", "they are paddock's own"},
}

// paddockSets says why paddock keeps a variable to itself, or "". Names
// are compared in upper case: HTTP_PROXY and http_proxy are one to most
// tools, and refusing Path or home as well costs nothing.
func paddockSets(name string) string {
	up := strings.ToUpper(name)
	if why, ok := paddockOwn[up]; ok {
		return fmt.Sprintf("paddock sets %s (%s); a project file cannot change it", up, why)
	}
	for _, p := range paddockPrefixes {
		if strings.HasPrefix(up, p.prefix) {
			return fmt.Sprintf("paddock sets the %s* variables (%s); a project file cannot set one", p.prefix, p.why)
		}
	}
	return ""
}

// The words of a variable's name that say it holds a secret. A name is
// cut into words at '_' and where a lower-case letter meets an upper-case
// one (githubToken is github, Token), and each word compared in upper case:
//
//   - secretWords match a word that is one of them or ends with one:
//     GITHUB_TOKEN, GHTOKEN, CLIENTSECRET, DB_PASSWORD, MYAPIKEY.
//     TOKENIZER_MODEL and MAX_TOKENS do not (TOKENIZER and TOKENS neither
//     are nor end with TOKEN);
//   - keyWords match a word that is or ends with one of them followed by
//     the word KEY or KEYS: API_KEY, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY,
//     SSH_KEY. KEY alone (CACHE_KEY, SORT_KEY, PUBLIC_KEY) is not a secret;
//   - AUTH counts as the last word only, or at the end of it (BASIC_AUTH,
//     OAUTH, GITHUB_OAUTH): elsewhere it names where authentication
//     happens (AUTH_URL, NEXTAUTH_URL, AUTH_DOMAIN), and AUTHOR, AUTHORS
//     and AUTHORITY never match;
//   - PAT counts as a whole word (GITHUB_PAT), never inside one (PATH is
//     paddock's anyway, PATTERN, SPATIAL).
var (
	secretWords = []string{"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "APIKEY", "PRIVATEKEY", "ACCESSKEY"}
	keyWords    = []string{"API", "PRIVATE", "ACCESS", "SIGNING", "ENCRYPTION", "MASTER", "SSH"}
)

// secretNameWord returns the rule a name matched as a secret's, said for
// a person ("the word TOKEN"), or "" if it matched none.
func secretNameWord(name string) string {
	words := splitWords(name)
	for i, w := range words {
		for _, s := range secretWords {
			if strings.HasSuffix(w, s) {
				if w == s {
					return fmt.Sprintf("the word %s", s)
				}
				return fmt.Sprintf("%s ends with %s", w, s)
			}
		}
		if i+1 < len(words) && (words[i+1] == "KEY" || words[i+1] == "KEYS") {
			for _, k := range keyWords {
				if strings.HasSuffix(w, k) {
					return fmt.Sprintf("the words %s_%s", w, words[i+1])
				}
			}
		}
		if w == "PAT" {
			return "the word PAT"
		}
	}
	if last := words[len(words)-1]; strings.HasSuffix(last, "AUTH") {
		return fmt.Sprintf("the last word %s", last)
	}
	return ""
}

// splitWords cuts a name into upper-case words at '_' and at each change
// from a lower-case letter to an upper-case one; it never returns an
// empty list (empty words between two '_' are dropped, but for a name of
// only '_', which gives one empty word).
func splitWords(name string) []string {
	var words []string
	start := 0
	add := func(end int) {
		if end > start {
			words = append(words, strings.ToUpper(name[start:end]))
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			add(i)
			start = i + 1
		case c >= 'A' && c <= 'Z' && i > start && name[i-1] >= 'a' && name[i-1] <= 'z':
			add(i)
			start = i
		}
	}
	add(len(name))
	if len(words) == 0 {
		words = []string{""}
	}
	return words
}

// credentialRule is one shape of credential and what to call it.
type credentialRule struct {
	what string
	re   *regexp.Regexp
}

// credentialRules are the shapes of credentials found anywhere in a value,
// each after the value's start or a character that is not a letter or
// digit (so "disk-…" is not "sk-…"), with what to call it. The tails have
// a least length so that the bare prefix in prose ("the sk- keys") is not
// one. Order matters only for the name given: the first match is said.
var credentialRules = []credentialRule{
	{"an Anthropic API key or token (sk-ant-…)", shape(`sk-ant-[A-Za-z0-9_-]{8,}`)},
	{"a paddock session token (" + secret.TokenPrefix + "…)", shape(regexp.QuoteMeta(secret.TokenPrefix) + `[A-Za-z0-9_-]{8,}`)},
	{"a GitHub token (ghp_…, gho_…, ghu_…, ghs_…, ghr_…)", shape(`gh[pousr]_[A-Za-z0-9]{16,}`)},
	{"a GitHub fine-grained token (github_pat_…)", shape(`github_pat_[A-Za-z0-9_]{16,}`)},
	{"a GitLab token (glpat-…)", shape(`glpat-[A-Za-z0-9_-]{16,}`)},
	{"a Slack token (xoxb-…)", shape(`xox[abprs]-[A-Za-z0-9-]{10,}`)},
	{"an AWS access key id (AKIA…)", shape(`(?:AKIA|ASIA)[0-9A-Z]{16}`)},
	{"a private key (-----BEGIN … PRIVATE KEY-----)", shape(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY`)},
	{"an npm token (npm_…)", shape(`npm_[A-Za-z0-9]{20,}`)},
	{"a Stripe key (sk_live_…)", shape(`[rs]k_(?:live|test)_[A-Za-z0-9]{10,}`)},
	{"a Google API key (AIza…)", shape(`AIza[0-9A-Za-z_-]{30,}`)},
	{"a Hugging Face token (hf_…)", shape(`hf_[A-Za-z0-9]{30,}`)},
	{"an API key (sk-…)", shape(`sk-[A-Za-z0-9_-]{20,}`)},
	{"a JSON Web Token (eyJ….eyJ…)", shape(`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}`)},
	{"an HTTP credential (Bearer …, Basic …)", regexp.MustCompile(`^\s*(?i:bearer|basic)\s+[A-Za-z0-9+/=._~-]{8,}\s*$`)},
}

// shape compiles a credential's pattern to match after the start of the
// value or a character that is no letter or digit.
func shape(re string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[^A-Za-z0-9])` + re)
}

// credentialShaped says what s looks like a credential of, or "".
func credentialShaped(s string) string {
	for _, r := range credentialRules {
		if r.re.MatchString(s) {
			return r.what
		}
	}
	return ""
}
