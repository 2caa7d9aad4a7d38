package runner

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// adoption is what an import takes of a file's settings.
type adoption struct {
	create api.CreateRequest
	record adoptedRecord
	// adopted and declined say, in words, each setting taken from the
	// file, and each one it asked for that was not (with the flag that
	// takes it).
	adopted, declined []string
}

// take says a setting taken from the file.
func (ad *adoption) take(format string, a ...any) {
	ad.adopted = append(ad.adopted, fmt.Sprintf(format, a...))
}

// decline says a setting the file asked for that was not taken.
func (ad *adoption) decline(format string, a ...any) {
	ad.declined = append(ad.declined, fmt.Sprintf(format, a...))
}

// importEgress is the egress posture an import starts from: a create's
// default. A file's posture is taken only if it is no wider, or with
// KeepEgress.
const importEgress = session.EgressOffline

// egressWidth orders postures by what they let a box reach.
func egressWidth(posture string) int {
	switch posture {
	case "", session.EgressOffline:
		return 0
	case session.EgressAnthropic:
		return 1
	}
	return 2
}

// adopt decides what an import takes of a file's settings, never more
// than this Runner's defaults give unless req says so: a file is what
// someone handed the importer, and it may ask for anything.
//
//   - credential mode direct (the importer's own credential in the box,
//     past the credential proxy and every budget): only with
//     KeepCredentialMode; else proxy;
//   - an egress posture wider than importEgress, allow rules, ask mode,
//     attached policies and approvals: only with KeepEgress; approvals
//     are then recorded as imported from the file, the approver the file
//     names quoted as what the file said, never as who approved;
//   - a limit or budget looser than the Runner's default (none where it
//     has one, or a larger one): only with KeepLimits;
//   - the rest (name, model, effort, restart policy, deny rules, limits
//     no looser than the defaults, the restarts' history) always.
//
// Every setting taken is said in adopted, every one not in declined.
func (r *Runner) adopt(st portable.Settings, req api.ImportRequest, now time.Time) (adoption, error) {
	var ad adoption
	take := ad.take
	cr := api.CreateRequest{Name: req.Name, Backend: req.Backend, Workspace: req.Workspace, NoStart: req.NoStart,
		Model: st.Model, Effort: st.Effort, Restart: string(st.Restart)}
	if cr.Name == "" {
		cr.Name = st.Name
		if st.Name != "" {
			take("name %s", st.Name)
		}
	}
	if st.Model != "" {
		take("model %s", st.Model)
	}
	if st.Effort != "" {
		take("effort %s", st.Effort)
	}
	if st.Restart != "" {
		take("restart policy %s", st.Restart)
	}
	ad.adoptCredentialMode(st, req, &cr)
	if err := r.adoptEgress(&ad, st, req, &cr, now); err != nil {
		return ad, err
	}
	ad.adoptLimits(st, req, r.opts.Config.Sessions, &cr)
	ad.record.restarts = st.Restarts
	ad.create = cr
	return ad, nil
}

// adoptCredentialMode: direct only with KeepCredentialMode, else proxy.
func (ad *adoption) adoptCredentialMode(st portable.Settings, req api.ImportRequest, cr *api.CreateRequest) {
	take, decline := ad.take, ad.decline
	switch {
	case st.CredentialMode != session.ModeDirect:
		take("credential mode proxy")
	case req.KeepCredentialMode:
		cr.CredentialMode = string(session.ModeDirect)
		take("credential mode direct, with --keep-credential-mode: your own credential goes into the box, past the credential proxy and every limit and budget")
	default:
		decline("credential mode direct (your own credential in the box, past the credential proxy and every limit and budget): the session is proxy mode; --keep-credential-mode takes it")
	}
}

// adoptEgress: a posture no wider than importEgress, and the deny rules,
// always; a wider one, allow rules, ask mode, attached policies (each one
// in this Runner's config) and approvals only with KeepEgress.
func (r *Runner) adoptEgress(ad *adoption, st portable.Settings, req api.ImportRequest, cr *api.CreateRequest, now time.Time) error {
	take, decline := ad.take, ad.decline
	posture := st.Egress
	if posture == "" {
		posture = session.EgressOffline
	}
	switch {
	case egressWidth(posture) <= egressWidth(importEgress):
		cr.Egress = posture
		take("egress %s", posture)
	case req.KeepEgress:
		cr.Egress = posture
		take("egress %s, with --keep-egress", posture)
	default:
		cr.Egress = importEgress
		decline("egress %s: the session is %s; --keep-egress takes it", posture, importEgress)
	}
	var claimed []string
	var approved []session.Approval
	for _, a := range st.EgressApproved {
		if !a.Until.IsZero() && !now.Before(a.Until) {
			continue // expired: nothing to carry
		}
		claimed = append(claimed, printable(a.Rule, 256)+" (the file says by "+printable(a.By, 64)+")")
		approved = append(approved, session.Approval{Rule: a.Rule, Until: a.Until, At: now, By: importedBy(req.Source, a.By)})
	}
	keepRules := req.KeepEgress && cr.Egress == session.EgressAllowlist
	for _, ru := range []struct {
		what  string // with the items after it
		items []string
		apply func()
	}{
		{"allow rules ", st.EgressAllow, func() { cr.Allow = st.EgressAllow }},
		{"egress policies ", st.EgressPolicies, func() { cr.EgressPolicy = st.EgressPolicies[0]; ad.record.policies = st.EgressPolicies }},
		{"ask mode", boolItem(st.EgressAsk), func() { cr.Ask = true }},
		{"approvals ", claimed, func() { ad.record.approved = approved }},
	} {
		what := ru.what + strings.Join(ru.items, ", ")
		switch {
		case len(ru.items) == 0:
		case keepRules:
			ru.apply()
			if ru.what != "approvals " { // approvals: said one by one below
				take("%s, with --keep-egress", what)
			}
		case req.KeepEgress:
			decline("%s: egress %s has none", what, cr.Egress)
		default:
			decline("%s: not taken; --keep-egress takes it, with the file's egress allowlist", what)
		}
	}
	if keepRules {
		for _, a := range approved {
			take("approval of %s, with --keep-egress, recorded as by %q", printable(a.Rule, 256), a.By)
		}
	}
	if cr.EgressPolicy != "" {
		for _, p := range st.EgressPolicies {
			if _, ok := r.opts.Config.Egress.Policies[p]; !ok {
				return fmt.Errorf("the session file's egress policy %q is not in this Runner's config (egress.policies.%s): add it there, then import again: %w", p, p, errdefs.ErrNotFound)
			}
		}
	}
	if len(st.EgressDeny) > 0 { // deny rules only narrow
		cr.Deny = st.EgressDeny
		take("deny rules: %s", strings.Join(st.EgressDeny, ", "))
	}
	return nil
}

// adoptLimits: each limit and budget no looser than def, this Runner's
// default, always; a looser one only with KeepLimits.
func (ad *adoption) adoptLimits(st portable.Settings, req api.ImportRequest, def config.Sessions, cr *api.CreateRequest) {
	take, decline := ad.take, ad.decline
	lim := limits.Limits{RPM: def.RPM, Concurrent: def.MaxStreams, TokenBudget: def.TokenBudget, BudgetUSD: def.BudgetUSD}
	for _, f := range []struct {
		what        string
		file, deflt float64
		set         func(float64)
		show        func(float64) string
	}{
		{"rpm limit", float64(st.Limits.RPM), float64(def.RPM), func(v float64) { lim.RPM = int(v) }, plainLimit},
		{"max streams", float64(st.Limits.Concurrent), float64(def.MaxStreams), func(v float64) { lim.Concurrent = int(v) }, plainLimit},
		{"token budget", float64(st.Limits.TokenBudget), float64(def.TokenBudget), func(v float64) { lim.TokenBudget = int64(v) }, plainLimit},
		{"budget", st.Limits.BudgetUSD, def.BudgetUSD, func(v float64) { lim.BudgetUSD = v }, dollarLimit},
	} {
		switch {
		case f.file == f.deflt:
			if f.file != 0 {
				take("%s %s", f.what, f.show(f.file))
			}
		case f.file != 0 && (f.deflt == 0 || f.file < f.deflt): // no looser
			f.set(f.file)
			take("%s %s", f.what, f.show(f.file))
		case req.KeepLimits:
			f.set(f.file)
			take("%s %s, with --keep-limits (this Runner's default is %s)", f.what, f.show(f.file), f.show(f.deflt))
		default:
			decline("%s %s: looser than this Runner's %s, which the session has; --keep-limits takes it", f.what, f.show(f.file), f.show(f.deflt))
		}
	}
	// The create checks them as it checks run's; the record takes them
	// all after, "none" too.
	cr.RPM, cr.MaxStreams, cr.TokenBudget, cr.BudgetUSD = lim.RPM, lim.Concurrent, lim.TokenBudget, lim.BudgetUSD
	ad.record.limits = lim
}

// boolItem is one item, empty, for true: a setting without a value.
func boolItem(b bool) []string {
	if b {
		return []string{""}
	}
	return nil
}

func plainLimit(v float64) string {
	if v == 0 {
		return "none"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func dollarLimit(v float64) string {
	if v == 0 {
		return "none"
	}
	return "$" + strconv.FormatFloat(v, 'f', -1, 64)
}

// importedBy is who an approval carried over by an import is recorded
// as approved by: the file it came from, and the approver it names only
// as what the file said.
func importedBy(source, claimed string) string {
	src := printable(path.Base(source), 64)
	if source == "" || src == "." || src == "/" {
		src = "a session file"
	}
	return "imported from " + src + " (approver said " + printable(claimed, 64) + ")"
}

// printable is s with what a terminal would act on (control characters,
// invalid UTF-8) as '?', at most n runes.
func printable(s string, n int) string {
	var b strings.Builder
	k := 0
	for _, c := range s {
		if k == n {
			b.WriteString("…")
			break
		}
		if c == utf8.RuneError || !unicode.IsPrint(c) {
			c = '?'
		}
		b.WriteRune(c)
		k++
	}
	return b.String()
}
