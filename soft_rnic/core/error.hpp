// One internal error type for everything that breaks a connection, and the one place that maps
// it to what each audience sees: the Terminate an iWARP peer receives (RFC 5040/5041 layer, type,
// code), the AETH NAK a RoCEv2 requester receives, the completion status the request it hits gets
// on either wire, and a name for logs. The transports name only the Error; what a peer's report
// (Terminate, NAK) or a segment that does not decode means is mapped here too.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "mr_table.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/roce.hpp"

namespace softrnic {

enum class Error : std::uint8_t {
  local_catastrophic,   // our side failed: a region freed or unmapped, the hard watermark passed
  ddp_version,          // a segment of another DDP version
  queue_number,         // an untagged segment for a queue that does not exist
  rdmap_version,        // another RDMAP version
  unexpected_opcode,    // an opcode that is invalid, or not supported
  msn_range,            // an MSN already completed or too far ahead, a Read Request out of order
  no_buffer,            // no receive buffer for the MSN (none posted, the SRQ empty), or the IRD exceeded
  message_too_long,     // more than the receive buffer holds
  bad_offset,           // a segment beyond the message's last one
  read_too_large,       // an RDMA Read larger than the largest message
  invalid_stag,         // tagged: no such STag (or a stale key)
  stag_not_associated,  // tagged: another protection zone, or no Read outstanding for a response
  out_of_bounds,        // tagged: outside the region
  access_violation,     // tagged: the region does not grant the access
  cannot_invalidate,    // Send with Invalidate names no bound window of the zone
};
inline constexpr int kErrorCount = static_cast<int>(Error::cannot_invalidate) + 1;

std::string_view to_string(Error e);

// The Terminate an iWARP peer gets for it.
struct TerminateCode {
  wire::TermLayer layer;
  std::uint8_t etype;
  std::uint8_t code;
};
TerminateCode terminate_code(Error e);

// The AETH syndrome of the NAK a RoCEv2 requester gets for it (IBTA 9.7.5.2.8): invalid request,
// remote access error or remote operational error.
std::uint8_t nak_syndrome(Error e);

// A tagged access that failed its check (MrCheck::ok is not an error: do not call it with that).
Error tagged_error(MrCheck c);

// What a post answers for a segment of its own memory that failed its check, as the uDAPL pages
// class it (dat_srq_post_recv, dat_ep_post_*): a region that is not there or lacks the privilege,
// a privileges violation; another protection zone's, a protection violation; a segment outside
// its region, an invalid parameter.
Status local_status(MrCheck c);

// A DDP/RDMAP header that does not decode (DecodeError::none is not an error).
Error decode_error(wire::DecodeError e);

// The completion status of the request a peer's Terminate refused.
WcStatus terminated_status(wire::TermLayer layer, std::uint8_t etype);

// The completion status of the request a peer's NAK refused; nullopt for a syndrome that does
// not end a request (an ACK, an RNR NAK, a PSN sequence error NAK) or that no NAK code names.
std::optional<WcStatus> nak_status(std::uint8_t syndrome);

}  // namespace softrnic
