package hostrun

import (
	"slices"
	"strings"
)

// rules is the table Classify matches paths against; the first match
// gives the reason, so specific rules come before the broad ones at the
// end (script extensions, scripts directories, binaries).
//
// Where a rule matches: names of distinctive files and dot-directories
// match at any depth, because tools look for them in subdirectories
// (make -C, per-directory .gitattributes, monorepo workspaces where every
// package.json's install scripts run, an editor opened on a subfolder,
// CLAUDE.md files read as the agent enters a directory). That includes
// copies no tool reads, such as tests/fixtures/package.json: from names
// alone a fixture and a workspace look the same, and a workspace glob
// like "**" makes a fixture a workspace. Generic names (hooks, scripts,
// bin) are narrowed: see the rules that use them.
//
// Left out on purpose: .go files (go:generate lines run only when asked,
// and all Go code would be noise); tsconfig.json (only read; the plugins
// it names load from node_modules, which a package.json or lockfile change
// shows); .editorconfig, .gitignore, .dockerignore (read, but steer
// nothing that runs); .env.example-like templates (no tool loads them);
// sources in general.
var rules = []rule{
	// --- git ---

	// Git refuses to check out such paths (core.protectNTFS/HFS); one in
	// a diff is an attack on git itself. "git~1" is .git's NTFS 8.3 name.
	{why: "inside a .git directory (git config and hooks; git refuses these paths)", dirs: []string{".git", "git~1"}},
	{why: "a git hook run by husky (core.hooksPath)", dirs: []string{".husky"}, stems: []string{".huskyrc", "husky.config"}},
	{why: "a git hooks directory (core.hooksPath): run by git", dirs: []string{".githooks", ".git-hooks", "githooks", "git-hooks"}},
	{why: "named like a git hook in a hooks directory (core.hooksPath may point here)", match: isHookInHooksDir},
	{why: "names filters and diff/merge drivers git runs from your config", names: []string{".gitattributes"}},
	{why: "submodule urls git fetches (git submodule update)", names: []string{".gitmodules"}},
	{why: "git config; projects include it (include.path) to set hooks and filters", names: []string{".gitconfig"}},
	{why: "git-lfs config: the server git-lfs talks to", names: []string{".lfsconfig"}},
	{why: "commands lefthook runs as git hooks", stems: []string{"lefthook", ".lefthook", "lefthook-local", ".lefthook-local"}, dirs: []string{".lefthook", ".lefthook-local"}},
	{why: "commands pre-commit runs as git hooks", names: []string{".pre-commit-config.yaml", ".pre-commit-config.yml", ".pre-commit-hooks.yaml", ".pre-commit-hooks.yml"}},
	{why: "git hooks run by overcommit", names: []string{".overcommit.yml", ".overcommit.yaml"}},
	{why: "commands simple-git-hooks installs as git hooks", stems: []string{".simple-git-hooks", "simple-git-hooks"}},
	{why: "commands lint-staged runs at commit", stems: []string{".lintstagedrc", "lint-staged.config"}},
	{why: "code commitlint runs at commit (commit-msg hook)", stems: []string{".commitlintrc", "commitlint.config"}},

	// --- AI coding agents on the owner's machine ---

	{why: "instructions your own claude code reads", names: []string{"claude.md", "claude.local.md"}},
	{why: "claude code project config: hooks run commands; commands, agents, skills", dirs: []string{".claude"}},
	{why: "mcp servers your agent starts (each is a program run)", names: []string{".mcp.json"}},
	{why: "instructions github copilot reads", seqs: [][]string{{".github", "copilot-instructions.md"}, {".github", "instructions"}, {".github", "prompts"}, {".github", "agents"}, {".github", "chatmodes"}}},
	{why: "instructions other coding agents read (codex, cursor, gemini, ...)", names: []string{"agents.md", "agent.md", "gemini.md", ".cursorrules", ".windsurfrules", ".clinerules", ".roomodes", ".goosehints", "opencode.json", "opencode.jsonc"}, stems: []string{".aider.conf"}},
	{why: "config an ai coding agent loads: rules, mcp servers, hooks", dirs: []string{".cursor", ".windsurf", ".clinerules", ".roo", ".continue", ".gemini", ".codex", ".junie", ".amazonq", ".kiro", ".opencode", ".agents"}},

	// --- editors and IDEs ---

	{why: "vs code workspace config: tasks run on folder open, settings name programs", dirs: []string{".vscode"}, exts: []string{".code-workspace"}},
	{why: "dev container config: initializeCommand runs on the host", dirs: []string{".devcontainer"}, names: []string{".devcontainer.json"}},
	{why: "jetbrains project config: run configurations, external tools, file watchers", dirs: []string{".idea", ".run", ".fleet"}},
	{why: "zed project config: tasks and language-server commands", dirs: []string{".zed"}},
	{why: "helix project config: language-server commands", dirs: []string{".helix"}},
	{why: "visual studio local config: tasks and launch commands", dirs: []string{".vs"}},
	{why: "editor project config: build systems and tasks", dirs: []string{".nova", ".theia"}, exts: []string{".sublime-project"}},
	{why: "eclipse project: builders eclipse runs", names: []string{".project"}, dirs: []string{".externaltoolbuilders"}},
	{why: "vim/neovim local config, sourced when 'exrc' is set", names: []string{".nvim.lua", ".nvimrc", ".exrc", ".vimrc", ".gvimrc", ".lvimrc"}},
	{why: "emacs directory variables (eval forms run)", names: []string{".dir-locals.el", ".dir-locals-2.el"}},
	{why: "xcode project: run-script build phases and scheme actions", dirSuffixes: []string{".xcodeproj", ".xcworkspace"}, exts: []string{".xcscheme"}},

	// --- shell and environment ---

	{why: "run by direnv when you enter the directory (a shell script)", stems: []string{".envrc"}},
	{why: "paddock's project file: a session's image, setup command and egress", names: []string{".paddock.toml"}},
	{why: "environment variables loaded by dotenv/direnv/compose", match: isDotenv},
	{why: "mise config: tasks, env and hooks run on cd; picks tools", names: []string{"mise.toml", ".mise.toml", ".rtx.toml"}, affixes: [][2]string{{"mise.", ".toml"}, {".mise.", ".toml"}, {".rtx.", ".toml"}}, dirs: []string{".mise"}, seqs: [][]string{{".config", "mise"}}},
	{why: "selects a toolchain version that is downloaded and run", names: []string{".tool-versions", ".nvmrc", ".node-version", ".python-version", ".ruby-version", ".java-version", ".go-version", ".terraform-version", ".sdkmanrc", ".bazelversion", ".bun-version", "rust-toolchain", "rust-toolchain.toml", "global.json"}},
	{why: "a shell start-up file (run when sourced or installed as a dotfile)", names: []string{".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc"}},
	{why: "run at start-up by an interpreter or debugger started here", names: []string{".irbrc", ".pryrc", ".rprofile", ".pdbrc", ".gdbinit", ".lldbinit"}},

	// --- build tools ---

	{why: "run by make", names: []string{"makefile", "gnumakefile"}, exts: []string{".mk", ".mak"}},
	{why: "recipes run by just", names: []string{"justfile", ".justfile"}, exts: []string{".just"}},
	{why: "tasks run by task", affixes: [][2]string{{"taskfile", ".yml"}, {"taskfile", ".yaml"}}},
	{why: "ruby run by rake", names: []string{"rakefile", "rakefile.rb"}, exts: []string{".rake"}},
	{why: "run by gradle (build scripts and buildSrc are code)", exts: []string{".gradle", ".gradle.kts"}, dirs: []string{"buildsrc"}},
	{why: "gradle wrapper: downloads and runs the gradle named here", names: []string{"gradlew", "gradlew.bat"}, seqs: [][]string{{"gradle", "wrapper"}}},
	{why: "gradle settings and version catalog: jvm options, dependencies", names: []string{"gradle.properties"}, exts: []string{".versions.toml"}},
	{why: "maven build: plugins run during the build", names: []string{"pom.xml"}},
	{why: "maven wrapper and extensions, run by mvn", names: []string{"mvnw", "mvnw.cmd"}, dirs: []string{".mvn"}},
	{why: "scala run by sbt", exts: []string{".sbt"}, names: []string{".sbtopts", ".jvmopts"}},
	{why: "sbt build definition (scala run by sbt)", match: isSbtProject},
	{why: "run by cmake (cmake scripts run programs)", names: []string{"cmakelists.txt", "cmakepresets.json", "cmakeuserpresets.json"}, exts: []string{".cmake"}},
	{why: "run by meson", names: []string{"meson.build", "meson_options.txt", "meson.options"}},
	{why: "shell run by ./configure and autotools", names: []string{"configure", "configure.ac", "configure.in", "makefile.am", "makefile.in"}, exts: []string{".m4"}},
	{why: "starlark run by bazel; .bazelrc sets its flags", names: []string{"build.bazel", "workspace.bazel", "workspace.bzlmod", "module.bazel", ".bazelrc", ".bazeliskrc"}, exts: []string{".bzl"}},
	{why: "python run by scons or waf", names: []string{"sconstruct", "sconscript", "wscript"}},
	{why: "lua run by premake/xmake", names: []string{"premake5.lua", "premake4.lua", "xmake.lua"}},
	{why: "c/c++ dependencies conan or vcpkg builds (conanfile.py is code)", names: []string{"conanfile.py", "conanfile.txt", "vcpkg.json", "vcpkg-configuration.json"}},
	{why: "run by zig build", names: []string{"build.zig", "build.zig.zon"}},
	{why: "run by cargo before building (build script)", names: []string{"build.rs"}},
	{why: "msbuild project: targets run on build and in the ide's design-time builds", exts: []string{".csproj", ".fsproj", ".vbproj", ".vcxproj", ".proj", ".props", ".targets", ".sln", ".slnx"}},
	{why: "container build run by docker/podman", stems: []string{"dockerfile", "containerfile"}, affixes: [][2]string{{"dockerfile-", ""}, {"containerfile-", ""}}, exts: []string{".dockerfile", ".containerfile"}, names: []string{"docker-bake.hcl", "docker-bake.json"}},
	{why: "docker compose: containers, host mounts, commands", names: []string{"compose.yml", "compose.yaml"}, affixes: [][2]string{{"docker-compose", ".yml"}, {"docker-compose", ".yaml"}, {"compose.", ".yml"}, {"compose.", ".yaml"}}},
	{why: "ruby run by vagrant", names: []string{"vagrantfile"}},
	{why: "nix flake: evaluated by nix; its dev shell runs hooks", names: []string{"flake.nix"}},
	{why: "nix expression evaluated by nix-shell/nix build", exts: []string{".nix"}},
	{why: "terraform config: init and plan run providers and external programs", exts: []string{".tf", ".tf.json"}, names: []string{"terragrunt.hcl", ".terraformrc", "terraform.rc"}},
	{why: "commands a dev-environment tool runs (tilt, earthly, foreman, devbox)", names: []string{"tiltfile", "earthfile", "devbox.json", "skaffold.yaml", "brewfile"}, stems: []string{"procfile"}},
	{why: "go run by mage", names: []string{"magefile.go"}, dirs: []string{"magefiles"}},
	{why: "python run by invoke, fabric or doit (the file is imported)", match: atRoot("tasks.py", "fabfile.py", "dodo.py")},

	// --- package managers: manifests, their config, lockfiles ---

	{why: "run by npm on install (lifecycle scripts) and npm run", names: []string{"package.json", "package.json5", "package.yaml"}},
	{why: "npm config: registry, script shell, node options", names: []string{".npmrc"}},
	{why: "yarn config: yarnPath is run, plugins load", names: []string{".yarnrc", ".yarnrc.yml", ".yarnrc.yaml"}},
	{why: "yarn releases, plugins and packages run by yarn", dirs: []string{".yarn"}},
	{why: "run by pnpm on install (.pnpmfile hooks)", stems: []string{".pnpmfile", "pnpmfile"}},
	{why: "pnpm workspace: packages installed and allowed to build", names: []string{"pnpm-workspace.yaml", "pnpm-workspace.yml"}},
	{why: "bun config: preload scripts run before bun runs anything", names: []string{"bunfig.toml", ".bunfig.toml"}},
	{why: "deno config: tasks and permissions", names: []string{"deno.json", "deno.jsonc"}},
	{why: "monorepo task runner config: commands it runs", names: []string{"nx.json", "turbo.json", "lerna.json", "rush.json"}},
	{why: "lockfile: chooses which package code is downloaded and run", names: []string{
		"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock", "bun.lockb", "deno.lock",
		"cargo.lock", "poetry.lock", "pipfile.lock", "uv.lock", "pdm.lock", "pylock.toml", "gemfile.lock", "gems.locked",
		"composer.lock", "mix.lock", "podfile.lock", "pubspec.lock", "flake.lock", ".terraform.lock.hcl",
		"packages.lock.json", "gradle.lockfile", "conan.lock", "package.resolved", "cabal.project.freeze", "stack.yaml.lock",
	}, affixes: [][2]string{{"pylock.", ".toml"}}},
	{why: "go module checksums: which downloaded code go accepts", names: []string{"go.sum", "go.work.sum"}},
	{why: "go module: a toolchain line makes go download and run another go", names: []string{"go.mod"}},
	{why: "go workspace: which modules go builds and runs", names: []string{"go.work"}},
	{why: "python project: build backend, dependencies and tool config", names: []string{"pyproject.toml"}},
	{why: "run by pip/python on install and build", names: []string{"setup.py"}},
	{why: "setuptools config read at install (entry points, build commands)", names: []string{"setup.cfg"}},
	{why: "dependencies pip installs (their build code runs)", match: isRequirements},
	{why: "python dependencies pipenv/conda/hatch install", names: []string{"pipfile", "environment.yml", "environment.yaml", "hatch.toml", "pdm.toml", "uv.toml"}},
	{why: "commands run by tox", names: []string{"tox.ini"}},
	{why: "python run by nox", names: []string{"noxfile.py"}},
	{why: "run by pytest at start (conftest.py is imported)", names: []string{"conftest.py"}},
	{why: "pytest config: plugins and options loaded at start", names: []string{"pytest.ini", ".pytest.ini"}},
	{why: "imported by python at start-up when on sys.path", names: []string{"sitecustomize.py", "usercustomize.py"}},
	{why: "compiled python, imported in place of its source", exts: []string{".pyc", ".pyo"}},
	{why: "composer: scripts run on install", names: []string{"composer.json"}},
	{why: "php run by a php tool at start (php-cs-fixer, rector, phpunit bootstrap)", names: []string{".php-cs-fixer.php", ".php-cs-fixer.dist.php", "rector.php", "phpunit.xml", "phpunit.xml.dist"}},
	{why: "ruby run by bundler (and the gems it installs)", names: []string{"gemfile", "gems.rb"}, exts: []string{".gemspec"}},
	{why: "ruby run by a ruby tool (cocoapods, fastlane, guard, capistrano, danger)", names: []string{"podfile", "fastfile", "appfile", "guardfile", "capfile", "dangerfile"}},
	{why: "rspec options (--require loads code)", names: []string{".rspec"}},
	{why: "cargo manifest: dependencies, build scripts, proc macros", names: []string{"cargo.toml"}},
	{why: "cargo config: runners, rustc wrapper, aliases", dirs: []string{".cargo"}},
	{why: "swift run by swiftpm (the manifest is code)", names: []string{"package.swift"}},
	{why: "elixir/erlang build config run by mix or rebar3", names: []string{"mix.exs", "rebar.config"}},
	{why: "haskell build config (custom setup, dependencies)", names: []string{"setup.hs", "setup.lhs", "cabal.project", "cabal.project.local", "stack.yaml"}, exts: []string{".cabal"}},
	{why: "clojure build config run by lein/clojure/babashka", names: []string{"project.clj", "deps.edn", "bb.edn"}},
	{why: "dart/flutter dependencies and build hooks", names: []string{"pubspec.yaml"}},
	{why: "perl run by the installer", names: []string{"makefile.pl", "build.pl", "cpanfile"}},
	{why: "nimscript run by nimble/nim", names: []string{"config.nims"}, exts: []string{".nimble", ".nims"}},
	{why: ".net tools and package sources restored and run", names: []string{"dotnet-tools.json", "nuget.config"}},
	{why: "a js tool config (js configs run as code; plugins load)", stems: jsConfigStems},
	{why: "storybook config (js run by storybook)", dirs: []string{".storybook"}},

	// --- CI: runs with the repository's secrets ---

	{why: "github actions workflow (runs in ci with repository secrets)", seqs: [][]string{{".github", "workflows"}, {".forgejo", "workflows"}, {".gitea", "workflows"}}},
	{why: "a github action (run by the workflows that use it)", seqs: [][]string{{".github", "actions"}, {".gitea", "actions"}}, names: []string{"action.yml", "action.yaml"}},
	{why: "gitlab ci pipeline", names: []string{".gitlab-ci.yml", ".gitlab-ci.yaml"}, exts: []string{".gitlab-ci.yml", ".gitlab-ci.yaml"}, seqs: [][]string{{".gitlab", "ci"}}},
	{why: "circleci pipeline", dirs: []string{".circleci"}},
	{why: "jenkins pipeline (groovy run by jenkins)", stems: []string{"jenkinsfile"}},
	{why: "travis ci pipeline", names: []string{".travis.yml", ".travis.yaml"}},
	{why: "azure pipelines ci", names: []string{"azure-pipelines.yml", "azure-pipelines.yaml"}, dirs: []string{".azure-pipelines", ".azuredevops"}},
	{why: "buildkite pipeline", dirs: []string{".buildkite"}},
	{why: "bitbucket pipelines ci", names: []string{"bitbucket-pipelines.yml", "bitbucket-pipelines.yaml"}},
	{why: "drone ci pipeline", names: []string{".drone.yml", ".drone.yaml", ".drone.jsonnet", ".drone.star"}},
	{why: "woodpecker ci pipeline", stems: []string{".woodpecker"}, dirs: []string{".woodpecker"}},
	{why: "ci pipeline (appveyor, cirrus, cloud build, codebuild, semaphore)", names: []string{"appveyor.yml", ".appveyor.yml", ".cirrus.yml", ".cirrus.star", "cloudbuild.yaml", "cloudbuild.yml", "buildspec.yml", "buildspec.yaml"}, dirs: []string{".semaphore"}},
	{why: "commands run on deploy or in a cloud dev environment", names: []string{"netlify.toml", "vercel.json", ".gitpod.yml", ".replit", "replit.nix"}},
	{why: "release tool config: hooks run commands", stems: []string{".goreleaser", "goreleaser", ".releaserc", "release.config", ".release-it"}},
	{why: "the repository's own ci scripts", dirs: []string{".ci"}},

	// --- broad rules last: scripts and binaries ---

	{why: "a script; check where it is called from", exts: []string{".sh", ".bash", ".zsh", ".fish", ".ksh", ".csh", ".ps1", ".psm1", ".bat", ".cmd", ".command", ".vbs"}},
	{why: "in a top-level scripts directory developers run", rootDirs: []string{"bin", "script", "scripts"}},
	// After the scripts directories, so scripts/build is "a script".
	{why: "a bazel build file (starlark run by bazel)", names: []string{"build", "workspace"}},
	{why: "a program or native library (a binary cannot be reviewed)", exts: []string{".exe", ".dll", ".so", ".dylib", ".jar", ".msi", ".node", ".appimage"}},
}

// jsConfigStems are JavaScript tools' config files: the .js/.mjs/.ts
// forms are run as code when the tool starts, and the JSON/YAML forms name
// plugins it loads, so all forms count.
var jsConfigStems = []string{
	".babelrc", "babel.config", "webpack.config", "vite.config", "rollup.config", "rspack.config", "esbuild.config",
	"eslint.config", ".eslintrc", ".prettierrc", "prettier.config", ".stylelintrc", "stylelint.config",
	"jest.config", "vitest.config", "vitest.workspace", ".mocharc", "karma.conf", "playwright.config", "cypress.config",
	"postcss.config", ".postcssrc", "tailwind.config", "tsup.config", "next.config", "nuxt.config", "svelte.config",
	"astro.config", "vue.config", "remix.config", "metro.config", "quasar.config", "ember-cli-build",
	"gulpfile", "gruntfile", ".swcrc",
}

// gitHooks are the hook names git runs (githooks(5)); on Windows git also
// runs name + ".exe".
var gitHooks = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
	"pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
	"fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
	"p4-pre-submit", "post-index-change",
}

// isHookInHooksDir: the file is named like a git hook (not a .sample,
// which git does not run) and its directory's name has "hook" in it
// ("hooks", ".hooks", "git_hooks"). core.hooksPath can name any directory,
// so a hooks directory anywhere counts; requiring the hook name keeps
// docs/hooks/README.md out.
func isHookInHooksDir(comps []string) bool {
	if len(comps) < 2 || !strings.Contains(comps[len(comps)-2], "hook") {
		return false
	}
	base := strings.TrimSuffix(comps[len(comps)-1], ".exe")
	for _, h := range gitHooks {
		if base == h {
			return true
		}
	}
	return false
}

// isDotenv: ".env", ".env.<anything>" and "<name>.env" (compose's
// env_file), but not the templates ".env.example", ".env.sample",
// ".env.template", ".env.tmpl", ".env.dist", which no loader reads.
func isDotenv(comps []string) bool {
	base := comps[len(comps)-1]
	switch {
	case base == ".env":
		return true
	case strings.HasPrefix(base, ".env."):
		switch base[len(".env."):] {
		case "example", "sample", "template", "tmpl", "dist":
			return false
		}
		return true
	}
	return strings.HasSuffix(base, ".env")
}

// isRequirements: pip requirement and constraint files by their usual
// names, and any .txt or .in file in a "requirements" directory
// (requirements/dev.txt).
func isRequirements(comps []string) bool {
	base := comps[len(comps)-1]
	for _, pre := range []string{"requirements", "constraints"} {
		if strings.HasPrefix(base, pre) && (strings.HasSuffix(base, ".txt") || strings.HasSuffix(base, ".in")) {
			return true
		}
	}
	return len(comps) >= 2 && comps[len(comps)-2] == "requirements" &&
		(strings.HasSuffix(base, ".txt") || strings.HasSuffix(base, ".in"))
}

// isSbtProject: sbt compiles and runs project/*.scala and reads
// project/build.properties (which picks the sbt version it downloads).
func isSbtProject(comps []string) bool {
	n := len(comps)
	return n >= 2 && comps[n-2] == "project" &&
		(strings.HasSuffix(comps[n-1], ".scala") || comps[n-1] == "build.properties")
}

// atRoot is a match for files only at the top of the repository, for
// names too common deeper down (a Celery app has many tasks.py).
func atRoot(names ...string) func([]string) bool {
	return func(comps []string) bool {
		return len(comps) == 1 && slices.Contains(names, comps[0])
	}
}
