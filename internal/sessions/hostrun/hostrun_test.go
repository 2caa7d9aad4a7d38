package hostrun

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// positives are paths that must be flagged, each with a piece of the
// reason it must get. TestClassifyPositives also checks that every rule
// is hit by at least one of them.
var positives = []struct{ path, why string }{
	// git
	{".git/hooks/pre-commit", ".git directory"},
	{"sub/.GIT/config", ".git directory"},
	{"GIT~1/config", ".git directory"},
	{".g\u200cit/hooks/post-checkout", ".git directory"}, // HFS+ ignores U+200C
	{".husky/pre-commit", "husky"},
	{".husky/_/husky.sh", "husky"},
	{".huskyrc.json", "husky"},
	{".githooks/pre-push", "hooks directory (core.hooksPath)"},
	{"tools/git-hooks/anything", "hooks directory (core.hooksPath)"},
	{"hooks/pre-commit", "named like a git hook"},
	{"ci/hooks/post-checkout", "named like a git hook"},
	{"dev/git_hooks/commit-msg.exe", "named like a git hook"},
	{".gitattributes", "filters and diff/merge drivers"},
	{"third_party/x/.gitattributes", "filters and diff/merge drivers"},
	{".gitmodules", "submodule"},
	{".gitconfig", "include.path"},
	{".lfsconfig", "git-lfs"},
	{".lefthook.yml", "lefthook"},
	{"lefthook.yml", "lefthook"},
	{"lefthook-local.yml", "lefthook"},
	{".lefthook/pre-commit/lint.sh", "lefthook"},
	{".pre-commit-config.yaml", "pre-commit"},
	{".pre-commit-hooks.yaml", "pre-commit"},
	{".overcommit.yml", "overcommit"},
	{".simple-git-hooks.json", "simple-git-hooks"},
	{".simple-git-hooks.js", "simple-git-hooks"},
	{".lintstagedrc", "lint-staged"},
	{".lintstagedrc.mjs", "lint-staged"},
	{"lint-staged.config.js", "lint-staged"},
	{"commitlint.config.ts", "commitlint"},

	// agents
	{"CLAUDE.md", "your own claude code"},
	{".claude/CLAUDE.md", "your own claude code"},
	{"pkg/api/CLAUDE.md", "your own claude code"},
	{".claude/settings.json", "claude code project config"},
	{".claude/commands/deploy.md", "claude code project config"},
	{".mcp.json", "mcp servers"},
	{".github/copilot-instructions.md", "copilot"},
	{".github/instructions/go.instructions.md", "copilot"},
	{"AGENTS.md", "other coding agents"},
	{".cursorrules", "other coding agents"},
	{".aider.conf.yml", "other coding agents"},
	{".cursor/rules/x.mdc", "ai coding agent"},
	{".gemini/settings.json", "ai coding agent"},

	// editors
	{".vscode/tasks.json", "vs code"},
	{".vscode/settings.json", "vs code"},
	{".vscode/extensions.json", "vs code"},
	{".vscode", "vs code"}, // a symbolic link standing for the directory
	{"web/.VSCode/tasks.json", "vs code"},
	{"paddock.code-workspace", "vs code"},
	{".devcontainer/devcontainer.json", "initializeCommand"},
	{".devcontainer.json", "initializeCommand"},
	{".idea/workspace.xml", "jetbrains"},
	{".fleet/run.json", "jetbrains"},
	{".run/server.run.xml", "jetbrains"},
	{".zed/tasks.json", "zed"},
	{".helix/languages.toml", "helix"},
	{".vs/tasks.vs.json", "visual studio"},
	{"app.sublime-project", "editor project config"},
	{".nova/Configuration.json", "editor project config"},
	{".project", "eclipse"},
	{".externalToolBuilders/b.launch", "eclipse"},
	{".nvim.lua", "'exrc'"},
	{".exrc", "'exrc'"},
	{".vimrc", "'exrc'"},
	{".dir-locals.el", "emacs"},
	{"App.xcodeproj/project.pbxproj", "xcode"},

	// shell and environment
	{".envrc", "direnv"},
	{"svc/.envrc.local", "direnv"},
	{".paddock.toml", "project file"},
	{"services/api/.paddock.toml", "project file"},
	{".env", "dotenv"},
	{".env.local", "dotenv"},
	{"deploy/prod.env", "dotenv"},
	{"mise.toml", "mise"},
	{".mise.toml", "mise"},
	{"mise.local.toml", "mise"},
	{".config/mise/config.toml", "mise"},
	{".tool-versions", "toolchain"},
	{".nvmrc", "toolchain"},
	{".node-version", "toolchain"},
	{".python-version", "toolchain"},
	{"rust-toolchain", "toolchain"},
	{"rust-toolchain.toml", "toolchain"},
	{".bashrc", "shell start-up"},
	{"dotfiles/.zshrc", "shell start-up"},
	{".gdbinit", "interpreter or debugger"},
	{".Rprofile", "interpreter or debugger"},

	// build tools
	{"Makefile", "run by make"},
	{"makefile", "run by make"},
	{"GNUmakefile", "run by make"},
	{"sub/dir/Makefile", "run by make"},
	{"MAKEFILE", "run by make"},
	{"Makefile. ", "run by make"},      // Win32 drops trailing dots and spaces
	{"Makefile::$DATA", "run by make"}, // the NTFS data stream of Makefile
	{"Ma\u212Aefile", "run by make"},   // Kelvin sign folds to k
	{"build/rules.mk", "run by make"},
	{"justfile", "just"},
	{"Justfile", "just"},
	{".justfile", "just"},
	{"Taskfile.yml", "run by task"},
	{"Taskfile.yaml", "run by task"},
	{"Rakefile", "rake"},
	{"lib/tasks/db.rake", "rake"},
	{"build.gradle", "gradle (build scripts"},
	{"build.gradle.kts", "gradle (build scripts"},
	{"settings.gradle", "gradle (build scripts"},
	{"settings.gradle.kts", "gradle (build scripts"},
	{"buildSrc/src/main/kotlin/Conv.kt", "gradle (build scripts"},
	{"gradlew", "gradle wrapper"},
	{"gradle/wrapper/gradle-wrapper.properties", "gradle wrapper"},
	{"gradle/wrapper/gradle-wrapper.jar", "gradle wrapper"},
	{"gradle.properties", "gradle settings"},
	{"gradle/libs.versions.toml", "gradle settings"},
	{"pom.xml", "maven build"},
	{"module/pom.xml", "maven build"},
	{".mvn/extensions.xml", "maven wrapper"},
	{"mvnw", "maven wrapper"},
	{"build.sbt", "run by sbt"},
	{"project/Dependencies.scala", "sbt build definition"},
	{"CMakeLists.txt", "cmake"},
	{"cmake/FindFoo.cmake", "cmake"},
	{"meson.build", "meson"},
	{"configure", "autotools"},
	{"configure.ac", "autotools"},
	{"Makefile.am", "autotools"},
	{"m4/ax_check.m4", "autotools"},
	{"BUILD.bazel", "bazel; .bazelrc"},
	{"MODULE.bazel", "bazel; .bazelrc"},
	{"tools/defs.bzl", "bazel; .bazelrc"},
	{".bazelrc", "bazel; .bazelrc"},
	{"pkg/BUILD", "bazel build file"},
	{"WORKSPACE", "bazel build file"},
	{"SConstruct", "scons"},
	{"premake5.lua", "premake"},
	{"conanfile.py", "conan"},
	{"build.zig", "zig"},
	{"build.rs", "cargo before building"},
	{"crates/x/build.rs", "cargo before building"},
	{"src/App.csproj", "msbuild"},
	{"Directory.Build.props", "msbuild"},
	{"Dockerfile", "docker/podman"},
	{"Dockerfile.dev", "docker/podman"},
	{"Dockerfile-prod", "docker/podman"},
	{"docker/api.dockerfile", "docker/podman"},
	{"Containerfile", "docker/podman"},
	{"docker-compose.yml", "compose"},
	{"docker-compose.override.yaml", "compose"},
	{"compose.yaml", "compose"},
	{"compose.dev.yml", "compose"},
	{"Vagrantfile", "vagrant"},
	{"flake.nix", "nix flake"},
	{"shell.nix", "nix expression"},
	{"default.nix", "nix expression"},
	{"infra/main.tf", "terraform"},
	{"Tiltfile", "dev-environment"},
	{"Procfile.dev", "dev-environment"},
	{"magefile.go", "mage"},
	{"tasks.py", "invoke"},

	// package managers
	{"package.json", "npm on install"},
	{"packages/web/package.json", "npm on install"},
	{"tests/fixtures/package.json", "npm on install"}, // see the rules' doc
	{".npmrc", "npm config"},
	{".yarnrc", "yarn config"},
	{".yarnrc.yml", "yarn config"},
	{".yarn/releases/yarn-4.1.0.cjs", "yarn releases"},
	{".yarn/plugins/p.cjs", "yarn releases"},
	{".pnpmfile.cjs", "pnpm"},
	{"pnpm-workspace.yaml", "pnpm workspace"},
	{"bunfig.toml", "bun config"},
	{"deno.json", "deno"},
	{"deno.jsonc", "deno"},
	{"nx.json", "task runner"},
	{"package-lock.json", "lockfile"},
	{"yarn.lock", "lockfile"},
	{"pnpm-lock.yaml", "lockfile"},
	{"Cargo.lock", "lockfile"},
	{"poetry.lock", "lockfile"},
	{"Gemfile.lock", "lockfile"},
	{"composer.lock", "lockfile"},
	{"pylock.dev.toml", "lockfile"},
	{"go.sum", "checksums"},
	{"go.mod", "toolchain line"},
	{"tools/go.mod", "toolchain line"},
	{"go.work", "go workspace"},
	{"pyproject.toml", "python project"},
	{"setup.py", "pip/python"},
	{"setup.cfg", "setuptools"},
	{"requirements.txt", "pip installs"},
	{"requirements-dev.txt", "pip installs"},
	{"requirements/test.in", "pip installs"},
	{"constraints.txt", "pip installs"},
	{"Pipfile", "pipenv"},
	{"tox.ini", "tox"},
	{"noxfile.py", "nox"},
	{"conftest.py", "conftest.py is imported"},
	{"tests/unit/conftest.py", "conftest.py is imported"},
	{"pytest.ini", "pytest config"},
	{"sitecustomize.py", "start-up when on sys.path"},
	{"pkg/mod.pyc", "compiled python"},
	{"composer.json", "composer"},
	{"phpunit.xml.dist", "php tool"},
	{"Gemfile", "bundler"},
	{"paddock.gemspec", "bundler"},
	{"ios/Podfile", "ruby tool"},
	{".rspec", "rspec"},
	{"Cargo.toml", "cargo manifest"},
	{".cargo/config", "cargo config"},
	{".cargo/config.toml", "cargo config"},
	{"Package.swift", "swiftpm"},
	{"mix.exs", "mix"},
	{"x.cabal", "haskell"},
	{"deps.edn", "clojure"},
	{"pubspec.yaml", "dart"},
	{"Makefile.PL", "perl"},
	{"x.nimble", "nimscript"},
	{".config/dotnet-tools.json", ".net tools"},
	{".babelrc", "js tool config"},
	{"babel.config.js", "js tool config"},
	{"webpack.config.js", "js tool config"},
	{"vite.config.ts", "js tool config"},
	{"rollup.config.mjs", "js tool config"},
	{"eslint.config.js", "js tool config"},
	{".eslintrc.cjs", "js tool config"},
	{"jest.config.js", "js tool config"},
	{"vitest.config.ts", "js tool config"},
	{".prettierrc.js", "js tool config"},
	{"Gulpfile.js", "js tool config"},
	{".storybook/main.ts", "storybook"},

	// CI
	{".github/workflows/ci.yml", "github actions workflow"},
	{".forgejo/workflows/ci.yml", "github actions workflow"},
	{".github/actions/setup/action.yml", "github action"},
	{"action.yml", "github action"},
	{"tools/release/action.yaml", "github action"},
	{".gitlab-ci.yml", "gitlab"},
	{"ci/build.gitlab-ci.yml", "gitlab"},
	{".circleci/config.yml", "circleci"},
	{"Jenkinsfile", "jenkins"},
	{"Jenkinsfile.release", "jenkins"},
	{".travis.yml", "travis"},
	{"azure-pipelines.yml", "azure"},
	{".buildkite/pipeline.yml", "buildkite"},
	{"bitbucket-pipelines.yml", "bitbucket"},
	{".drone.yml", "drone"},
	{".woodpecker.yml", "woodpecker"},
	{".woodpecker/build.yaml", "woodpecker"},
	{"appveyor.yml", "appveyor"},
	{"netlify.toml", "deploy"},
	{".goreleaser.yaml", "release tool"},
	{".ci/run-tests", "own ci scripts"},

	// scripts and binaries
	{"hack/update.sh", "a script"},
	{"install.ps1", "a script"},
	{"win/build.bat", "a script"},
	{"win/setup.CMD", "a script"},
	{"tools/x.zsh", "a script"},
	{"scripts/release.py", "top-level scripts"},
	{"bin/setup", "top-level scripts"},
	{"script/bootstrap", "top-level scripts"},
	{"scripts/build", "top-level scripts"}, // not the bazel rule
	{"vendor/lib/libfoo.so", "native library"},
	{"tools/helper.exe", "native library"},
}

// negatives must not be flagged.
var negatives = []string{
	"src/main.go",
	"README.md",
	"docs/hooks.md",
	"docs/hooks/README.md",
	"hooks/pre-commit.sample", // git does not run .sample hooks
	"src/hooks/useAuth.ts",    // React hooks are not git hooks
	"notMakefile.txt",
	"Makefile.txt.orig/x.go",
	"my.envrc.bak", // direnv reads .envrc only
	".env.example", // a template: no loader reads it
	"tsconfig.json",
	".editorconfig",
	".gitignore",
	".dockerignore",
	"app/tasks.py", // invoke's tasks.py counts only at the top
	"internal/sessions/hostrun/rules.go",
	"docs/github/workflows.md",
	"pkg/scripts/gen.go",   // only a top-level scripts directory counts
	"tools/lint/main.go",   // tools/ is left out: usually source
	"composer.yml.example", // not compose.*.yml
	"mise-en-place.md",
	"cmd/paddock/main_test.go",
	".github/CODEOWNERS",
	".github/dependabot.yml",
	"web/src/App.tsx",
	"",
	"/",
	"./",
	"../..",
}

func TestClassifyPositives(t *testing.T) {
	hit := make([]bool, len(rules))
	for _, tc := range positives {
		i := classify(tc.path)
		if i < 0 {
			t.Errorf("%q: not flagged, want %q", tc.path, tc.why)
			continue
		}
		hit[i] = true
		if !strings.Contains(rules[i].why, tc.why) {
			t.Errorf("%q: why = %q, want it to contain %q", tc.path, rules[i].why, tc.why)
		}
	}
	for i, h := range hit {
		if !h {
			t.Errorf("rule %d (%q) has no positive case", i, rules[i].why)
		}
	}
}

func TestClassifyNegatives(t *testing.T) {
	for _, p := range negatives {
		if i := classify(p); i >= 0 {
			t.Errorf("%q: flagged as %q", p, rules[i].why)
		}
	}
}

// TestClassify checks the public contract: order kept, Path as given,
// others left out.
func TestClassify(t *testing.T) {
	in := []string{"README.md", "sub/Makefile", "src/main.go", "a\x1b[31m/.vscode/tasks.json", "a\xff/package.json", "Makefile"}
	got := Classify(in)
	want := []Finding{
		{"sub/Makefile", "run by make"},
		{"a\x1b[31m/.vscode/tasks.json", rules[classify(".vscode/tasks.json")].why},
		{"a\xff/package.json", rules[classify("package.json")].why},
		{"Makefile", "run by make"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if Classify(nil) != nil || Classify([]string{"README.md"}) != nil {
		t.Error("no findings must give nil")
	}
}

// TestOddPaths: odd paths do not panic and are judged by their name.
func TestOddPaths(t *testing.T) {
	long := strings.Repeat("a/", 5000) + "Makefile" // a 10 kB path
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"a//b", false},
		{"a//Makefile", true},
		{".vscode/", true},
		{"src/", false},
		{"", false},
		{"\x00", false},
		{"\xff\xfe", false},
		{"\xff/Makefile", true},
		{"Makefile\xff", false},
		{"\x1b]0;pwned\x07/Makefile", true},
		{long, true},
		{strings.Repeat("x", 10_000), false},
		{strings.Repeat("/", 10_000), false},
		{strings.Repeat("\u200c", 3000) + ".git/config", true},
		{`windows\style\.vscode\tasks.json`, true},
	} {
		if got := classify(tc.path) >= 0; got != tc.want {
			t.Errorf("%.40q: flagged = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// TestRuleTable keeps the table honest: every rule says why, in short
// lower-case words, and every name in it is in key form (else it could
// never match).
func TestRuleTable(t *testing.T) {
	for i, r := range rules {
		if r.why == "" || len(r.why) > 80 || strings.HasSuffix(r.why, ".") {
			t.Errorf("rule %d: why %q: want 1 to 80 bytes, no final period", i, r.why)
		}
		if first := []rune(r.why)[0]; unicode.IsUpper(first) {
			t.Errorf("rule %d: why %q starts upper case", i, r.why)
		}
		var all []string
		all = append(all, r.names...)
		all = append(all, r.stems...)
		all = append(all, r.exts...)
		all = append(all, r.dirs...)
		all = append(all, r.dirSuffixes...)
		all = append(all, r.rootDirs...)
		for _, a := range r.affixes {
			all = append(all, a[0]+"x"+a[1]) // "x" keeps an empty part from ending in '.'
		}
		for _, s := range r.seqs {
			all = append(all, s...)
		}
		for _, s := range all {
			if key(s) != s || s == "" {
				t.Errorf("rule %d (%q): %q is not in key form (want %q)", i, r.why, s, key(s))
			}
		}
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"Makefile":         "makefile",
		"makefile":         "makefile",
		".VSCode":          ".vscode",
		"Makefile...":      "makefile",
		"Makefile .":       "makefile",
		"a:b":              "a",
		".g\u200dit":       ".git",
		"\u017Fetup.py":    "setup.py", // long s
		"..":               "",
		".":                "",
		"\xff":             "\ufffd",
		"Dockerfile.Dev":   "dockerfile.dev",
		"plain-name_1.txt": "plain-name_1.txt",
	} {
		if got := key(in); got != want {
			t.Errorf("key(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseNameOnlyZ(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00", []string{""}},
		{"a\x00", []string{"a"}},
		{"a\x00b\x00", []string{"a", "b"}},
		{"a\x00b", []string{"a", "b"}}, // no final NUL
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"sp ace\x00new\nline\x00\xff\x00", []string{"sp ace", "new\nline", "\xff"}},
	} {
		got := ParseNameOnlyZ([]byte(tc.in))
		if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("ParseNameOnlyZ(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseNameOnlyZCopies: the paths do not alias the input.
func TestParseNameOnlyZCopies(t *testing.T) {
	b := []byte("Makefile\x00")
	got := ParseNameOnlyZ(b)
	copy(b, "XXXXXXXX")
	if got[0] != "Makefile" {
		t.Fatalf("path changed with the input: %q", got[0])
	}
}
