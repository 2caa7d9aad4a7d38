package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/zalando/go-keyring"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Keyring keeps the stored credential in the OS keyring (the Secret
// Service on Linux desktops), under service "paddock" and the state
// directory as the account, so two state directories keep two credentials.
type Keyring struct{ Account string }

const keyringService = "paddock"

// Save stores the credential.
func (k Keyring) Save(kind Kind, s secret.Value) error {
	b, err := json.Marshal(fileDoc{Version: 1, Kind: kind, Secret: s.Reveal()})
	if err != nil {
		return err
	}
	if err := keyring.Set(keyringService, k.Account, string(b)); err != nil {
		return fmt.Errorf("OS keyring: %v: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}

// Load reads it; ErrMissing when the keyring has none or there is no keyring.
func (k Keyring) Load() (Credential, error) {
	if ok, _ := sessionBus(); !ok {
		return Credential{}, ErrMissing
	}
	v, err := keyring.Get(keyringService, k.Account)
	if err != nil {
		return Credential{}, ErrMissing // none stored, or no keyring on this host
	}
	var d fileDoc
	if json.Unmarshal([]byte(v), &d) != nil || d.Kind.EnvVar() == "" || d.Secret == "" {
		return Credential{}, fmt.Errorf("the credential in the OS keyring is damaged; store it again with `paddock credential set`: %w", errdefs.ErrInvalid)
	}
	return Credential{Kind: d.Kind, Secret: secret.New(d.Secret), Source: "keyring:" + k.Account}, nil
}

// Remove deletes it; nothing stored is not an error.
func (k Keyring) Remove() error {
	err := keyring.Delete(keyringService, k.Account)
	if err == nil || errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("OS keyring: %w", err)
}

// KeyringAvailable reports whether this host has an OS keyring paddock can
// use, and if not, why.
func KeyringAvailable() (bool, string) {
	if ok, why := sessionBus(); !ok {
		return false, why
	}
	const probe = "paddock-probe"
	if err := keyring.Set(keyringService, probe, "x"); err != nil {
		return false, err.Error()
	}
	_ = keyring.Delete(keyringService, probe)
	return true, ""
}

// sessionBus reports whether a D-Bus session bus is there to talk to. The
// keyring library would otherwise try to start one (dbus-launch), which a
// daemon must not do behind its owner's back.
func sessionBus() (bool, string) {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		return false, "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)"
	}
	return true, ""
}
