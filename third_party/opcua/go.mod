module github.com/gopcua/opcua

go 1.23
