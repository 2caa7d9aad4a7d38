module github.com/paddockhq/paddock

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.45.0 // indirect
