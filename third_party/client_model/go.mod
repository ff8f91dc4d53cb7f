module github.com/prometheus/client_model

go 1.20
