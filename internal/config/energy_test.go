package config

import (
	"strings"
	"testing"
)

func TestEnergyValidate(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[energy]\ntimezone = \"Mars/Olympus\"\n", "energy.timezone"},
		{"[[energy.tariff]]\nname = \"a b\"\n", "energy.tariff[0].name"},
		{"[[energy.tariff]]\nname = \"none\"\n", "reserved"},
		{"[[energy.tariff]]\nname = \"t\"\n[[energy.tariff.band]]\nfrom = \"25:00\"\nto = \"07:00\"\n", "energy.tariff[0].band[0].from"},
		{"[[energy.tariff]]\nname = \"t\"\n[[energy.tariff.band]]\nfrom = \"07:00\"\nto = \"07:00\"\n", "equals from"},
		{"[[energy.tariff]]\nname = \"t\"\n[[energy.tariff.band]]\nfrom = \"07:00\"\nto = \"08:00\"\ndays = [\"funday\"]\n", "unknown day"},
		{"[[energy.tariff]]\nname = \"t\"\ncost = 1.0\n", "cost"},
		{"[[energy.report]]\nname = \"r\"\nevery = \"day\"\nenergy = [\"a\"]\n", "energy.report[0].every"},
		{"[[energy.report]]\nname = \"r\"\nevery = \"week\"\n", "energy.report[0].energy"},
		{"[[energy.report]]\nname = \"r\"\nevery = \"week\"\nenergy = [\"a\"]\ntariff = \"x\"\n", "energy.report[0].tariff"},
		{"[[energy.report]]\nname = \"r\"\nevery = \"week\"\nenergy = [\"a\"]\n[[energy.report]]\nname = \"r\"\nevery = \"month\"\ntags = [\"b\"]\n", "duplicate report"},
		{"[energy]\nlink = \"ftp://x\"\n", "energy.link"},
	} {
		cfg, err := Parse([]byte(tc.toml))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.toml, err, tc.want)
		}
	}
	cfg, err := Parse([]byte("[[energy.tariff]]\nname = \"t\"\nprice = 0.3\n[[energy.tariff.band]]\nfrom = \"23:00\"\nto = \"24:00\"\nprice = 0.1\ndays = [\"sat\", \"Sun\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid tariff refused: %v", err)
	}
}
