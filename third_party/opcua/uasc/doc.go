// Copyright 2018-2020 opcua authors. All rights reserved.
// Use of this source code is governed by a MIT-style license that can be
// found in the LICENSE file.

// Package uasc provides encoding/decoding and automated secure channel
// and session handling for OPC UA Secure Conversation.
package uasc
