package project

import (
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// TestSecretName: names that say they hold a secret, and names that only
// look close (the decisions are written at secretWords).
func TestSecretName(t *testing.T) {
	for name, want := range map[string]string{
		// whole words
		"GITHUB_TOKEN": "the word TOKEN", "TOKEN": "the word TOKEN", "token": "the word TOKEN",
		"AUTH_TOKEN_FILE": "the word TOKEN", "DJANGO_SECRET_KEY": "the word SECRET",
		"SECRETS_JSON": "the word SECRETS", "DB_PASSWORD": "the word PASSWORD", "MYSQL_PASSWD": "the word PASSWD",
		"GPG_PASSPHRASE": "the word PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS": "the word CREDENTIALS",
		"AZURE_CREDENTIAL": "the word CREDENTIAL", "GITHUB_PAT": "the word PAT",
		// suffixes of a word
		"GHTOKEN": "GHTOKEN ends with TOKEN", "CLIENTSECRET": "CLIENTSECRET ends with SECRET",
		"MYAPIKEY": "MYAPIKEY ends with APIKEY", "APIKEY": "the word APIKEY", "SSHPRIVATEKEY": "SSHPRIVATEKEY ends with PRIVATEKEY",
		"AWSACCESSKEY": "AWSACCESSKEY ends with ACCESSKEY", "DBPASSWORD_FILE": "DBPASSWORD ends with PASSWORD",
		// camel case
		"githubToken": "the word TOKEN", "clientSecret": "the word SECRET", "apiKey": "the words API_KEY",
		// two words with KEY
		"API_KEY": "the words API_KEY", "OPENAI_API_KEY": "the words API_KEY", "STRIPE_API_KEYS": "the words API_KEYS",
		"AWS_SECRET_ACCESS_KEY": "the word SECRET", "AWS_ACCESS_KEY_ID": "the words ACCESS_KEY",
		"JWT_PRIVATE_KEY": "the words PRIVATE_KEY", "SSH_KEY": "the words SSH_KEY", "APP_SIGNING_KEY": "the words SIGNING_KEY",
		"DATA_ENCRYPTION_KEY": "the words ENCRYPTION_KEY", "RAILS_MASTER_KEY": "the words MASTER_KEY",
		"OPENAPI_KEY": "the words OPENAPI_KEY",
		// AUTH last
		"BASIC_AUTH": "the last word AUTH", "GITHUB_OAUTH": "the last word OAUTH", "OAUTH": "the last word OAUTH",
		"ProxyAuth": "the last word AUTH",

		// not secrets
		"AUTHOR": "", "GIT_AUTHOR_NAME": "", "AUTHORS": "", "AUTHORITY": "", "AUTH_URL": "", "NEXTAUTH_URL": "",
		"AUTH_DOMAIN": "", "TOKENIZER_MODEL": "", "MAX_TOKENS": "", "MAX_THINKING_TOKENS": "", "TOKENS": "",
		"CACHE_KEY": "", "SORT_KEY": "", "PUBLIC_KEY": "", "KEY": "", "KEYBOARD_LAYOUT": "", "MONKEY": "",
		"PATTERN": "", "SPATIAL_INDEX": "", "PWD_HINT": "", "SECRETARY": "", "PASSWORDLESS": "",
		"NODE_ENV": "", "GOFLAGS": "", "_": "", "__": "", "A": "", "API": "", "ACCESS_LOG": "",
		"API_KEYBOARD": "",
	} {
		if got := secretNameWord(name); got != want {
			t.Errorf("secretNameWord(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCredentialShaped: values that look like credentials, wherever they
// sit in the value, and values that only hold the same letters.
func TestCredentialShaped(t *testing.T) {
	for v, want := range map[string]string{
		"sk-ant-api03-abcdefgh":                      "an Anthropic API key or token",
		"Bearer sk-ant-oat01-abcdefgh":               "an Anthropic API key or token",
		secret.TokenPrefix + "abcdefgh12":            "a paddock session token",
		"ghp_abcdefghijklmnop":                       "a GitHub token",
		"gho_abcdefghijklmnop":                       "a GitHub token",
		"ghs_abcdefghijklmnop":                       "a GitHub token",
		"ghu_abcdefghijklmnop":                       "a GitHub token",
		"ghr_abcdefghijklmnop":                       "a GitHub token",
		"https://x:ghp_abcdefghijklmnop@github.com":  "a GitHub token",
		"github_pat_11ABCDEFG0123456789_abc":         "a GitHub fine-grained token",
		"glpat-abcdefghijklmnop":                     "a GitLab token",
		"xoxb-1234567890-abc":                        "a Slack token",
		"xoxp-1234567890-abc":                        "a Slack token",
		"AKIAIOSFODNN7EXAMPLE":                       "an AWS access key id",
		"id=ASIAIOSFODNN7EXAMPLE":                    "an AWS access key id",
		"-----BEGIN PRIVATE KEY-----\nMII":           "a private key",
		"-----BEGIN RSA PRIVATE KEY-----":            "a private key",
		"-----BEGIN OPENSSH PRIVATE KEY-----":        "a private key",
		"x -----BEGIN EC PRIVATE KEY-----":           "a private key",
		"npm_abcdefghijklmnopqrstuvwxyz0123456789":   "an npm token",
		"sk_live_abcdefghij12":                       "a Stripe key",
		"rk_test_abcdefghij12":                       "a Stripe key",
		"AIzaSyA-abcdefghijklmnopqrstuvwxyz01234":    "a Google API key",
		"hf_abcdefghijklmnopqrstuvwxyz0123456":       "a Hugging Face token",
		"sk-proj-abcdefghijklmnopqrstuvwxyz":         "an API key (sk-…)",
		"sk-abcdefghijklmnopqrst":                    "an API key (sk-…)",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc":   "a JSON Web Token",
		"Bearer abcdefghijkl":                        "an HTTP credential",
		"basic dXNlcjpwYXNz":                         "an HTTP credential",
		"-mod=mod":                                   "",
		"development":                                "",
		"http://localhost:8080":                      "",
		"postgres://postgres:postgres@localhost/app": "",
		"task-runner-abcdefghijklmnopqrstuvwxyz":     "",
		"disk-abcdefghijklmnopqrstuvwxyz":            "",
		"sk-SK":                                      "",
		"the sk- keys":                               "",
		"ghp_short":                                  "",
		"AKIA":                                       "",
		"AKIAlowercase0123456":                       "",
		"-----BEGIN PUBLIC KEY-----":                 "",
		"-----BEGIN CERTIFICATE-----":                "",
		"eyJhbGciOiJIUzI1NiJ9":                       "",
		"basic setup":                                "",
		"use basic auth for the docs site":           "",
		"xhf_abcdefghijklmnopqrstuvwxyz0123456":      "",
		"npm_config":                                 "",
		"":                                           "",
	} {
		got := credentialShaped(v)
		if want == "" && got != "" || want != "" && !strings.HasPrefix(got, want) {
			t.Errorf("credentialShaped(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestSplitWords: names cut into words.
func TestSplitWords(t *testing.T) {
	for name, want := range map[string]string{
		"GITHUB_TOKEN": "GITHUB TOKEN", "githubToken": "GITHUB TOKEN", "__A__B": "A B",
		"_": "", "APIKey": "APIKEY", "a1B": "A1B", "aB": "A B", "x": "X",
	} {
		if got := strings.Join(splitWords(name), " "); got != want {
			t.Errorf("splitWords(%q) = %q, want %q", name, got, want)
		}
	}
}
