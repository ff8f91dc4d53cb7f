module github.com/pith-historian/pith

go 1.24.0

require (
	github.com/BurntSushi/toml v1.4.0
	github.com/eclipse/paho.golang v0.22.0
	github.com/expr-lang/expr v1.17.6
	github.com/golang/snappy v1.0.0
	github.com/gopcua/opcua v0.8.0
	github.com/jackc/pgx/v5 v5.7.1
	github.com/johannesboyne/gofakes3 v0.0.0-20240701191259-edd0227ffc37
	github.com/klauspost/compress v1.17.10
	github.com/minio/minio-go/v7 v7.0.77
	github.com/nats-io/nats.go v1.37.0
	github.com/prometheus/common v0.60.1
	github.com/prometheus/prometheus v0.300.1
	github.com/simonvetter/modbus v1.6.3
	golang.org/x/crypto v0.28.0
	golang.org/x/net v0.30.0
	golang.org/x/sys v0.38.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/aws/aws-sdk-go v1.55.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dennwc/varint v1.0.0 // indirect
	github.com/edsrzf/mmap-go v1.1.0 // indirect
	github.com/facette/natsort v0.0.0-20181210072756-2cd4dd1e2dcb // indirect
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/goburrow/serial v0.1.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/grafana/regexp v0.0.0-20240518133315-a468a5bfb3bc // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/klauspost/cpuid/v2 v2.2.8 // indirect
	github.com/minio/md5-simd v1.1.2 // indirect
	github.com/nats-io/nkeys v0.4.7 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/prometheus/client_golang v1.20.5 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/shabbyrobe/gocovmerge v0.0.0-20190829150210-3e036491d500 // indirect
	go.opentelemetry.io/otel v1.31.0 // indirect
	go.opentelemetry.io/otel/metric v1.31.0 // indirect
	go.opentelemetry.io/otel/trace v1.31.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/text v0.19.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)

replace github.com/expr-lang/expr => ./third_party/expr

replace github.com/prometheus/client_golang => ./third_party/client_golang

replace github.com/prometheus/client_model => ./third_party/client_model

replace github.com/gopcua/opcua => ./third_party/opcua
