-- softrnic_udp.lua: tshark/Wireshark dissector for softrnic's iWARP-over-UDP framing
-- (docs/wire.md). Each UDP datagram holds one frame:
--
--   byte 0  version (high nibble, = 1) | type (low nibble)
--   byte 1  flags (0x01 = ack valid, 0x02 = keepalive probe, 0x04 = probe reply,
--           0x08 = ack requested: the sender waits for this sequenced frame's acknowledgement)
--   2..3    reserved (0)
--   4..7    destination QP number      8..11  source QP number
--   12..15  sequence number            16..19 acknowledgement (cumulative)
--   20..    body
--   last 4  CRC32c (Castagnoli) over header + body, little-endian image
--
-- Type 1 (DDP) bodies go to tshark's built-in iwarp_ddp_rdmap dissector; type 3 (CM) and
-- type 4 (STREAM_CTRL) are decoded here; type 2 (ACK) carries an empty body or SACK blocks.
--
--   tshark -X lua_script:tools/wireshark/softrnic_udp.lua [-o softrnic.ports:5041-5104] -r cap.pcap
--
-- Problems become expert infos (Error: bad CRC, short datagram, bad version/type, CM private
-- data length beyond the body; Warning: anything else that disagrees with docs/wire.md), so
-- `_ws.expert.severity >= "Warning"` selects every frame that is not clean.

local proto = Proto("softrnic", "softrnic iWARP over UDP")

proto.prefs.ports = Pref.string("UDP ports", "5041-5104",
                                "UDP port range carrying softrnic frames (e.g. 5041-5104 or 5041,6000-6010)")

local HDR_LEN, TRAILER_LEN = 20, 4

local TYPE_NAMES = { [1] = "DDP", [2] = "ACK", [3] = "CM", [4] = "STREAM_CTRL" }
local CM_OPS = { [1] = "CONNECT_REQUEST", [2] = "CONNECT_REPLY", [3] = "REJECT", [4] = "READY_TO_USE",
                 [5] = "RESET", [6] = "RESET_ACK", [7] = "PENDING", [8] = "COOKIE" }
local CTRL_OPS = { [1] = "DISCONNECT" }
local CM_HDR_LEN, CM_MAX_PD = 24, 256

local F = {
  version  = ProtoField.uint8("softrnic.version", "Version", base.DEC, nil, 0xF0),
  type     = ProtoField.uint8("softrnic.type", "Type", base.DEC, TYPE_NAMES, 0x0F),
  flags    = ProtoField.uint8("softrnic.flags", "Flags", base.HEX),
  ackvalid = ProtoField.bool("softrnic.flags.ack_valid", "Acknowledgement valid", 8, nil, 0x01),
  probe    = ProtoField.bool("softrnic.flags.probe", "Keepalive probe", 8, nil, 0x02),
  probe_reply = ProtoField.bool("softrnic.flags.probe_reply", "Keepalive probe reply", 8, nil, 0x04),
  ack_req  = ProtoField.bool("softrnic.flags.ack_req", "Acknowledgement requested", 8, nil, 0x08),
  reserved = ProtoField.uint16("softrnic.reserved", "Reserved", base.HEX),
  dst_qpn  = ProtoField.uint32("softrnic.dst_qpn", "Destination QP", base.DEC),
  src_qpn  = ProtoField.uint32("softrnic.src_qpn", "Source QP", base.DEC),
  seq      = ProtoField.uint32("softrnic.seq", "Sequence number", base.DEC),
  ack      = ProtoField.uint32("softrnic.ack", "Acknowledgement", base.DEC),
  body     = ProtoField.bytes("softrnic.body", "Body"),
  crc      = ProtoField.uint32("softrnic.crc", "CRC32c", base.HEX),
  crc_calc = ProtoField.uint32("softrnic.crc_computed", "CRC32c (computed)", base.HEX),
  crc_status = ProtoField.string("softrnic.crc_status", "CRC status"),
  cm_op      = ProtoField.uint8("softrnic.cm.op", "CM op", base.DEC, CM_OPS),
  cm_rsvd    = ProtoField.uint8("softrnic.cm.rsvd", "CM reserved", base.DEC),
  cm_pd_len  = ProtoField.uint16("softrnic.cm.pd_len", "Private data length", base.DEC),
  cm_ird     = ProtoField.uint16("softrnic.cm.ird", "IRD", base.DEC),
  cm_ord     = ProtoField.uint16("softrnic.cm.ord", "ORD", base.DEC),
  cm_cq      = ProtoField.uint64("softrnic.cm.conn_qual", "Connection qualifier", base.DEC),
  cm_conn_id = ProtoField.uint32("softrnic.cm.conn_id", "Connection id", base.HEX),
  cm_iseq    = ProtoField.uint32("softrnic.cm.init_seq", "Initial sequence number", base.DEC),
  cm_pd      = ProtoField.bytes("softrnic.cm.private_data", "Private data"),
  ctrl_op    = ProtoField.uint32("softrnic.ctrl.op", "Stream control op", base.DEC, CTRL_OPS),
  sack_count = ProtoField.uint8("softrnic.sack.count", "SACK blocks", base.DEC),
  sack_start = ProtoField.uint32("softrnic.sack.start", "SACK block start", base.DEC),
  sack_end   = ProtoField.uint32("softrnic.sack.end", "SACK block end", base.DEC),
}
proto.fields = { F.version, F.type, F.flags, F.ackvalid, F.probe, F.probe_reply, F.ack_req, F.reserved, F.dst_qpn, F.src_qpn, F.seq,
                 F.ack, F.body, F.crc, F.crc_calc, F.crc_status, F.cm_op, F.cm_rsvd, F.cm_pd_len,
                 F.cm_ird, F.cm_ord, F.cm_cq, F.cm_conn_id, F.cm_iseq, F.cm_pd, F.ctrl_op,
                 F.sack_count, F.sack_start, F.sack_end }

local ERR, WARN = expert.severity.ERROR, expert.severity.WARN
local G = expert.group
local E = {
  bad_crc     = ProtoExpert.new("softrnic.bad_crc", "Bad softrnic CRC32c", G.CHECKSUM, ERR),
  too_short   = ProtoExpert.new("softrnic.too_short", "Datagram shorter than header + trailer (24 bytes)",
                                G.MALFORMED, ERR),
  bad_version = ProtoExpert.new("softrnic.bad_version", "Unknown framing version", G.MALFORMED, ERR),
  bad_type    = ProtoExpert.new("softrnic.bad_type", "Unknown frame type", G.MALFORMED, ERR),
  truncated   = ProtoExpert.new("softrnic.truncated", "Frame truncated by the capture: CRC32c not verified",
                                G.UNDECODED, WARN),
  reserved    = ProtoExpert.new("softrnic.reserved_nonzero", "Reserved header field is not 0", G.PROTOCOL, WARN),
  flags       = ProtoExpert.new("softrnic.undefined_flags", "Undefined flag bits set", G.PROTOCOL, WARN),
  qpn         = ProtoExpert.new("softrnic.qpn_range", "QP number exceeds 24 bits", G.PROTOCOL, WARN),
  ack_body    = ProtoExpert.new("softrnic.ack_body", "ACK body that is no SACK list", G.MALFORMED, WARN),
  cm_short    = ProtoExpert.new("softrnic.cm.short", "CM body shorter than the 24-byte CM header",
                                G.MALFORMED, ERR),
  cm_pd_len   = ProtoExpert.new("softrnic.cm.bad_pd_len", "CM private data length exceeds the body",
                                G.MALFORMED, ERR),
  cm_pd_max   = ProtoExpert.new("softrnic.cm.pd_too_long", "CM private data longer than 256 bytes",
                                G.PROTOCOL, WARN),
  cm_trailing = ProtoExpert.new("softrnic.cm.trailing", "Bytes after the CM private data", G.MALFORMED, WARN),
  cm_bad_op   = ProtoExpert.new("softrnic.cm.bad_op", "Unknown CM op", G.PROTOCOL, WARN),
  ctrl_len    = ProtoExpert.new("softrnic.ctrl.bad_len", "STREAM_CTRL body is not 4 bytes", G.MALFORMED, ERR),
  ctrl_bad_op = ProtoExpert.new("softrnic.ctrl.bad_op", "Unknown stream control op", G.PROTOCOL, WARN),
}
proto.experts = { E.bad_crc, E.too_short, E.bad_version, E.bad_type, E.truncated, E.reserved, E.flags,
                  E.qpn, E.ack_body, E.cm_short, E.cm_pd_len, E.cm_pd_max, E.cm_trailing, E.cm_bad_op,
                  E.ctrl_len, E.ctrl_bad_op }

local ddp_dissector = Dissector.get("iwarp_ddp_rdmap")

---------------------------------------------------------------------------------------------
-- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), slicing-by-16 over a Lua string.
-- Lua 5.2 (Wireshark 4.0) has no bit operators and bit32 calls are slow: the running CRC is
-- split into bytes with arithmetic, XORed with the data bytes through a 64K-entry byte XOR
-- table, and one bit32.bxor call per 16 bytes combines the table entries (about 45 MB/s,
-- 6x a plain byte loop).
local band, bxor, rshift, bnot = bit32.band, bit32.bxor, bit32.rshift, bit32.bnot
local sbyte = string.byte
local T = {}  -- T[k][b]: CRC contribution of byte b followed by k zero bytes
local X = {}  -- X[a * 256 + b] = a xor b, for bytes a, b
do
  T[0] = {}
  for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
      if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    T[0][i] = c
  end
  for k = 1, 15 do
    T[k] = {}
    for i = 0, 255 do
      local v = T[k - 1][i]
      T[k][i] = bxor(rshift(v, 8), T[0][band(v, 0xFF)])
    end
  end
  for a = 0, 255 do
    for b = 0, 255 do X[a * 256 + b] = bxor(a, b) end
  end
end
local T0, T1, T2, T3, T4, T5, T6, T7 = T[0], T[1], T[2], T[3], T[4], T[5], T[6], T[7]
local T8, T9, T10, T11, T12, T13, T14, T15 = T[8], T[9], T[10], T[11], T[12], T[13], T[14], T[15]

local function crc32c(s)
  local crc = 0xFFFFFFFF
  local n = #s
  local i = 1
  local lim = n - 15
  while i <= lim do
    local a1, a2, a3, a4, a5, a6, a7, a8, b1, b2, b3, b4, b5, b6, b7, b8 = sbyte(s, i, i + 15)
    local c0 = crc % 256; crc = (crc - c0) / 256
    local c1 = crc % 256; crc = (crc - c1) / 256
    local c2 = crc % 256; local c3 = (crc - c2) / 256
    crc = bxor(T15[X[c0 * 256 + a1]], T14[X[c1 * 256 + a2]], T13[X[c2 * 256 + a3]], T12[X[c3 * 256 + a4]],
               T11[a5], T10[a6], T9[a7], T8[a8], T7[b1], T6[b2], T5[b3], T4[b4], T3[b5], T2[b6], T1[b7], T0[b8])
    i = i + 16
  end
  while i <= n do
    local c0 = crc % 256
    crc = bxor(T0[X[c0 * 256 + sbyte(s, i)]], (crc - c0) / 256)
    i = i + 1
  end
  return bnot(crc)
end

---------------------------------------------------------------------------------------------

local function dissect_cm(body, pinfo, tree)
  local n = body:len()
  if n < CM_HDR_LEN then
    tree:add_proto_expert_info(E.cm_short, string.format("CM body is %d bytes, the CM header 24", n))
    return "CM (short)"
  end
  local t = tree:add(proto, body(0, n), "CM message")
  local op = body(0, 1):uint()
  local op_item = t:add(F.cm_op, body(0, 1))
  t:add(F.cm_rsvd, body(1, 1))
  local pd_len = body(2, 2):uint()
  local pd_item = t:add(F.cm_pd_len, body(2, 2))
  t:add(F.cm_ird, body(4, 2))
  t:add(F.cm_ord, body(6, 2))
  t:add(F.cm_cq, body(8, 8))
  t:add(F.cm_conn_id, body(16, 4))
  t:add(F.cm_iseq, body(20, 4))
  if not CM_OPS[op] then
    op_item:add_proto_expert_info(E.cm_bad_op, string.format("Unknown CM op %d", op))
  end
  local avail = n - CM_HDR_LEN
  if pd_len > avail then
    pd_item:add_proto_expert_info(E.cm_pd_len,
      string.format("Private data length %d exceeds the %d bytes after the CM header", pd_len, avail))
    if avail > 0 then t:add(F.cm_pd, body(CM_HDR_LEN, avail)) end
  else
    if pd_len > 0 then t:add(F.cm_pd, body(CM_HDR_LEN, pd_len)) end
    if avail > pd_len then
      t:add_proto_expert_info(E.cm_trailing,
        string.format("%d bytes after the private data", avail - pd_len))
    end
  end
  if pd_len > CM_MAX_PD then
    pd_item:add_proto_expert_info(E.cm_pd_max, string.format("Private data length %d > 256", pd_len))
  end
  local info = string.format("CM %s conn_qual=%s conn_id=0x%08x init_seq=%u",
                             CM_OPS[op] or ("op " .. op), tostring(body(8, 8):uint64()),
                             body(16, 4):uint(), body(20, 4):uint())
  if op == 3 then info = info .. string.format(" rsvd=%d", body(1, 1):uint()) end
  if pd_len > 0 then info = info .. string.format(" pd_len=%d", pd_len) end
  return info
end

local function dissect_ctrl(body, pinfo, tree, seq)
  local n = body:len()
  if n ~= 4 then
    tree:add_proto_expert_info(E.ctrl_len, string.format("STREAM_CTRL body is %d bytes, expected 4", n))
    if n < 4 then return string.format("STREAM_CTRL seq=%u (short)", seq) end
  end
  local op = body(0, 4):uint()
  local item = tree:add(F.ctrl_op, body(0, 4))
  if not CTRL_OPS[op] then
    item:add_proto_expert_info(E.ctrl_bad_op, string.format("Unknown stream control op %u", op))
  end
  return string.format("STREAM_CTRL %s seq=%u", CTRL_OPS[op] or ("op " .. op), seq)
end

function proto.dissector(tvb, pinfo, tree)
  local n = tvb:len()
  pinfo.cols.protocol:set("softrnic")
  local t = tree:add(proto, tvb(0, n))
  if n < HDR_LEN + TRAILER_LEN then
    if pinfo.in_error_pkt then return n end   -- short quote in an ICMP error
    t:add_proto_expert_info(E.too_short, string.format("Datagram of %d bytes, at least 24 needed", n))
    pinfo.cols.info:set(string.format("softrnic: malformed (%d bytes)", n))
    return n
  end

  -- header
  local version = rshift(tvb(0, 1):uint(), 4)
  local ftype = band(tvb(0, 1):uint(), 0x0F)
  local v_item = t:add(F.version, tvb(0, 1))
  local t_item = t:add(F.type, tvb(0, 1))
  local flags = tvb(1, 1):uint()
  local fl_item = t:add(F.flags, tvb(1, 1))
  fl_item:add(F.ackvalid, tvb(1, 1))
  fl_item:add(F.probe, tvb(1, 1))
  fl_item:add(F.probe_reply, tvb(1, 1))
  fl_item:add(F.ack_req, tvb(1, 1))
  local r_item = t:add(F.reserved, tvb(2, 2))
  local dq_item = t:add(F.dst_qpn, tvb(4, 4))
  local sq_item = t:add(F.src_qpn, tvb(8, 4))
  t:add(F.seq, tvb(12, 4))
  t:add(F.ack, tvb(16, 4))
  local dst_qpn, src_qpn = tvb(4, 4):uint(), tvb(8, 4):uint()
  local seq, ack = tvb(12, 4):uint(), tvb(16, 4):uint()
  if version ~= 1 then
    v_item:add_proto_expert_info(E.bad_version, string.format("Framing version %d, expected 1", version))
  end
  if not TYPE_NAMES[ftype] then
    t_item:add_proto_expert_info(E.bad_type, string.format("Unknown frame type %d", ftype))
  end
  if band(flags, 0xF0) ~= 0 then
    fl_item:add_proto_expert_info(E.flags, string.format("Flags 0x%02x: only 0x01, 0x02, 0x04 and 0x08 are defined", flags))
  end
  if band(flags, 0x08) ~= 0 and ftype ~= 1 and ftype ~= 4 then
    fl_item:add_proto_expert_info(E.flags, string.format("Flags 0x%02x: ack requested on a frame that is not sequenced", flags))
  end
  if band(flags, 0x06) ~= 0 and ftype ~= 2 then
    fl_item:add_proto_expert_info(E.flags, string.format("Flags 0x%02x: probe flags on a frame that is not an ACK", flags))
  end
  if tvb(2, 2):uint() ~= 0 then r_item:add_proto_expert_info(E.reserved) end
  if dst_qpn > 0xFFFFFF then dq_item:add_proto_expert_info(E.qpn) end
  if src_qpn > 0xFFFFFF then sq_item:add_proto_expert_info(E.qpn) end

  -- trailer
  local body_len = n - HDR_LEN - TRAILER_LEN
  local crc_ok
  local in_icmp = pinfo.in_error_pkt   -- a datagram quoted by an ICMP error: cut short
  local crc_item = not in_icmp and t:add_le(F.crc, tvb(n - TRAILER_LEN, TRAILER_LEN))
  if in_icmp then
    t:add(F.crc_status, "unverified")
  elseif tvb:reported_len() ~= n then
    t:add(F.crc_status, "unverified")
    crc_item:add_proto_expert_info(E.truncated)
  else
    local wire = tvb(n - TRAILER_LEN, TRAILER_LEN):le_uint()
    local calc = crc32c(tvb:raw(0, n - TRAILER_LEN))
    crc_ok = (wire == calc)
    if crc_ok then
      t:add(F.crc_status, "good")
    else
      t:add(F.crc_calc, calc):set_generated()
      t:add(F.crc_status, "bad")
      crc_item:add_proto_expert_info(E.bad_crc,
        string.format("Bad CRC32c 0x%08x, expected 0x%08x", wire, calc))
    end
  end

  -- body
  local info
  local body = body_len > 0 and tvb(HDR_LEN, body_len) or nil
  if version ~= 1 or not TYPE_NAMES[ftype] then
    if body then t:add(F.body, body) end
    info = string.format("softrnic: version %d type %d (not decoded)", version, ftype)
  elseif in_icmp then
    if body then t:add(F.body, body) end
    info = string.format("%s seq=%u ack=%u (in ICMP error)", TYPE_NAMES[ftype], seq, ack)
  elseif ftype == 1 then
    -- the DDP dissector sets its own Info text; keep it after ours
    pinfo.cols.info:clear()
    if body then
      -- an exception in the DDP dissector is already shown as a malformed packet; catch the
      -- Lua error it becomes so the Info column below is still written
      local ok = pcall(ddp_dissector.call, ddp_dissector, body:tvb(), pinfo, tree)
      if not ok then pinfo.cols.info:append(" [DDP dissector exception]") end
    else
      t:add_proto_expert_info(E.too_short, "DDP frame without a DDP segment")
    end
    local ddp_info = tostring(pinfo.cols.info)
    info = string.format("DDP seq=%u ack=%u %s", seq, ack, ddp_info)
  elseif ftype == 2 then
    -- An empty body, or SACK blocks: count (1 byte), 3 reserved, count x {start, end}.
    local nblocks = 0
    if body then
      nblocks = body(0, 1):uint()
      if body_len ~= 4 + 8 * nblocks or nblocks > 32 or body(1, 3):uint() ~= 0 then
        t:add(F.body, body)
        t:add_proto_expert_info(E.ack_body, string.format("ACK body of %d bytes is no SACK list", body_len))
      else
        t:add(F.sack_count, body(0, 1))
        for i = 0, nblocks - 1 do
          t:add(F.sack_start, body(4 + 8 * i, 4))
          t:add(F.sack_end, body(8 + 8 * i, 4))
        end
      end
    end
    info = string.format("ACK ack=%u sack=%d", ack, nblocks)
  elseif ftype == 3 then
    if body then
      info = dissect_cm(body:tvb(), pinfo, t)
    else
      t:add_proto_expert_info(E.cm_short, "CM frame without a body")
      info = "CM (empty)"
    end
  else
    if body then
      info = dissect_ctrl(body:tvb(), pinfo, t, seq)
    else
      t:add_proto_expert_info(E.ctrl_len, "STREAM_CTRL frame without a body")
      info = string.format("STREAM_CTRL seq=%u (empty)", seq)
    end
  end
  t:append_text(string.format(", %s, QP %u -> %u, seq %u, ack %u%s", TYPE_NAMES[ftype] or "?",
                              src_qpn, dst_qpn, seq, ack, band(flags, 1) == 1 and "" or " (not valid)"))
  if crc_ok == false then info = info .. " [BAD CRC32c]" end
  pinfo.cols.protocol:set(ftype == 1 and version == 1 and "softrnic/DDP" or "softrnic")
  pinfo.cols.info:set(info)
  return n
end

-- UDP port registration, following the `softrnic.ports` preference.
local udp_table = DissectorTable.get("udp.port")
local registered = nil

local function register_ports()
  local want = proto.prefs.ports
  if want == registered then return end
  if registered and registered ~= "" then udp_table:remove(registered, proto) end
  registered = nil
  if want and want ~= "" then
    udp_table:add(want, proto)
    registered = want
  end
end

function proto.prefs_changed()
  register_ports()
end

register_ports()
