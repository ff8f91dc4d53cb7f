package opcua

import (
	"os"

	"github.com/gopcua/opcua/debug"
)

// OPCUA_DEBUG=1 turns on the OPC UA library's protocol trace in the tests.
func init() {
	if os.Getenv("OPCUA_DEBUG") != "" {
		debug.Enable = true
	}
}
