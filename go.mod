module github.com/paddockhq/paddock

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/hashicorp/yamux v0.1.2
	github.com/spf13/cobra v1.10.2
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
)
