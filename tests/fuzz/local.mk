# Fuzz targets (included by tests/Makefile.am; see fuzz/README).  Each
# fuzz/NAME.c defines LLVMFuzzerTestOneInput.  make check builds it with
# replay.c's main() as fuzz-replay-NAME, which replays the checked-in
# corpus (fuzz/corpus/NAME, fuzz/regress/NAME) with any compiler; a build
# configured with --enable-fuzzing (clang) also links it with libFuzzer as
# fuzz/NAME, and `make fuzz FUZZ_SECONDS=N` runs each for N seconds.
fuzz_fs_targets = listing-json listing-html manifest s3-list gcs-list \
	gcp-token gcp-key aws-creds http-header hint-line size snapshot \
	aws-sts aws-json gcp-impersonation
fuzz_loader_targets = index decoder index-list tar
fuzz_targets = $(fuzz_loader_targets)
if ENABLE_FS
fuzz_targets += $(fuzz_fs_targets)
endif
fuzz_common = fuzz/fuzz.c fuzz/fuzz.h
fuzz_checks = fuzz/check-listing.c
fuzz_bins =
FUZZ_FS_LIBS = $(top_builddir)/fs/libwharffs.la
FUZZ_LOADER_LIBS = $(top_builddir)/loader/libwharfcore.la

check_PROGRAMS += fuzz-replay-index fuzz-replay-decoder
TESTS += fuzz-replay-index fuzz-replay-decoder
fuzz_bins += fuzz/index fuzz/decoder
fuzz_replay_index_SOURCES = fuzz/index.c fuzz/replay.c $(fuzz_common)
fuzz_replay_index_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_index_SOURCES = fuzz/index.c $(fuzz_common)
fuzz_index_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_index_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_decoder_SOURCES = fuzz/decoder.c fuzz/replay.c $(fuzz_common)
fuzz_replay_decoder_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_decoder_SOURCES = fuzz/decoder.c $(fuzz_common)
fuzz_decoder_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_decoder_LDFLAGS = $(FUZZ_LDFLAGS)
check_PROGRAMS += fuzz-replay-index-list
TESTS += fuzz-replay-index-list
fuzz_bins += fuzz/index-list
fuzz_replay_index_list_SOURCES = fuzz/index-list.c fuzz/replay.c \
	$(fuzz_common)
fuzz_replay_index_list_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_index_list_SOURCES = fuzz/index-list.c $(fuzz_common)
fuzz_index_list_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_index_list_LDFLAGS = $(FUZZ_LDFLAGS)
# Tar shards' headers (loader/tar.c).
check_PROGRAMS += fuzz-replay-tar
TESTS += fuzz-replay-tar
fuzz_bins += fuzz/tar
fuzz_replay_tar_SOURCES = fuzz/tar.c fuzz/replay.c $(fuzz_common)
fuzz_replay_tar_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_tar_SOURCES = fuzz/tar.c $(fuzz_common)
fuzz_tar_LDADD = $(FUZZ_LOADER_LIBS)
fuzz_tar_LDFLAGS = $(FUZZ_LDFLAGS)
if ENABLE_FS
check_PROGRAMS += fuzz-replay-listing-json fuzz-replay-listing-html \
	fuzz-replay-manifest fuzz-replay-s3-list fuzz-replay-gcs-list \
	fuzz-replay-gcp-token fuzz-replay-gcp-key fuzz-replay-aws-creds \
	fuzz-replay-http-header fuzz-replay-hint-line fuzz-replay-size \
	fuzz-replay-snapshot
TESTS += fuzz-replay-listing-json fuzz-replay-listing-html \
	fuzz-replay-manifest fuzz-replay-s3-list fuzz-replay-gcs-list \
	fuzz-replay-gcp-token fuzz-replay-gcp-key fuzz-replay-aws-creds \
	fuzz-replay-http-header fuzz-replay-hint-line fuzz-replay-size \
	fuzz-replay-snapshot
fuzz_bins += fuzz/listing-json fuzz/listing-html fuzz/manifest fuzz/s3-list \
	fuzz/gcs-list fuzz/gcp-token fuzz/gcp-key fuzz/aws-creds fuzz/http-header \
	fuzz/hint-line fuzz/size fuzz/snapshot
fuzz_replay_listing_json_SOURCES = fuzz/listing-json.c fuzz/replay.c \
	$(fuzz_common) $(fuzz_checks)
fuzz_replay_listing_json_LDADD = $(FUZZ_FS_LIBS)
fuzz_listing_json_SOURCES = fuzz/listing-json.c $(fuzz_common) $(fuzz_checks)
fuzz_listing_json_LDADD = $(FUZZ_FS_LIBS)
fuzz_listing_json_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_listing_html_SOURCES = fuzz/listing-html.c fuzz/replay.c \
	$(fuzz_common) $(fuzz_checks)
fuzz_replay_listing_html_LDADD = $(FUZZ_FS_LIBS)
fuzz_listing_html_SOURCES = fuzz/listing-html.c $(fuzz_common) $(fuzz_checks)
fuzz_listing_html_LDADD = $(FUZZ_FS_LIBS)
fuzz_listing_html_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_manifest_SOURCES = fuzz/manifest.c fuzz/replay.c $(fuzz_common) \
	$(fuzz_checks)
fuzz_replay_manifest_LDADD = $(FUZZ_FS_LIBS)
fuzz_manifest_SOURCES = fuzz/manifest.c $(fuzz_common) $(fuzz_checks)
fuzz_manifest_LDADD = $(FUZZ_FS_LIBS)
fuzz_manifest_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_s3_list_SOURCES = fuzz/s3-list.c fuzz/replay.c $(fuzz_common) \
	$(fuzz_checks)
fuzz_replay_s3_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_s3_list_SOURCES = fuzz/s3-list.c $(fuzz_common) $(fuzz_checks)
fuzz_s3_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_s3_list_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_gcs_list_SOURCES = fuzz/gcs-list.c fuzz/replay.c $(fuzz_common) \
	$(fuzz_checks)
fuzz_replay_gcs_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcs_list_SOURCES = fuzz/gcs-list.c $(fuzz_common) $(fuzz_checks)
fuzz_gcs_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcs_list_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_gcp_token_SOURCES = fuzz/gcp-token.c fuzz/replay.c $(fuzz_common)
fuzz_replay_gcp_token_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_token_SOURCES = fuzz/gcp-token.c $(fuzz_common)
fuzz_gcp_token_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_token_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_gcp_key_SOURCES = fuzz/gcp-key.c fuzz/replay.c $(fuzz_common)
fuzz_replay_gcp_key_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_key_SOURCES = fuzz/gcp-key.c $(fuzz_common)
fuzz_gcp_key_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_key_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_aws_creds_SOURCES = fuzz/aws-creds.c fuzz/replay.c $(fuzz_common)
fuzz_replay_aws_creds_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_creds_SOURCES = fuzz/aws-creds.c $(fuzz_common)
fuzz_aws_creds_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_creds_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_http_header_SOURCES = fuzz/http-header.c fuzz/replay.c \
	$(fuzz_common)
fuzz_replay_http_header_LDADD = $(FUZZ_FS_LIBS)
fuzz_http_header_SOURCES = fuzz/http-header.c $(fuzz_common)
fuzz_http_header_LDADD = $(FUZZ_FS_LIBS)
fuzz_http_header_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_hint_line_SOURCES = fuzz/hint-line.c fuzz/replay.c $(fuzz_common)
fuzz_replay_hint_line_LDADD = $(FUZZ_FS_LIBS)
fuzz_hint_line_SOURCES = fuzz/hint-line.c $(fuzz_common)
fuzz_hint_line_LDADD = $(FUZZ_FS_LIBS)
fuzz_hint_line_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_size_SOURCES = fuzz/size.c fuzz/replay.c $(fuzz_common)
fuzz_replay_size_LDADD = $(FUZZ_FS_LIBS)
fuzz_size_SOURCES = fuzz/size.c $(fuzz_common)
fuzz_size_LDADD = $(FUZZ_FS_LIBS)
fuzz_size_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_snapshot_SOURCES = fuzz/snapshot.c fuzz/replay.c $(fuzz_common)
fuzz_replay_snapshot_LDADD = $(FUZZ_FS_LIBS)
fuzz_snapshot_SOURCES = fuzz/snapshot.c $(fuzz_common)
fuzz_snapshot_LDADD = $(FUZZ_FS_LIBS)
fuzz_snapshot_LDFLAGS = $(FUZZ_LDFLAGS)
# Credential documents: STS XML, container/IMDS/credential_process JSON,
# GCS impersonation answers (external_account files: fuzz/gcp-key.c).
check_PROGRAMS += fuzz-replay-aws-sts fuzz-replay-aws-json \
	fuzz-replay-gcp-impersonation
TESTS += fuzz-replay-aws-sts fuzz-replay-aws-json \
	fuzz-replay-gcp-impersonation
fuzz_bins += fuzz/aws-sts fuzz/aws-json fuzz/gcp-impersonation
fuzz_keys = fuzz/check-keys.c
fuzz_replay_aws_sts_SOURCES = fuzz/aws-sts.c fuzz/replay.c $(fuzz_common) \
	$(fuzz_keys)
fuzz_replay_aws_sts_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_sts_SOURCES = fuzz/aws-sts.c $(fuzz_common) $(fuzz_keys)
fuzz_aws_sts_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_sts_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_aws_json_SOURCES = fuzz/aws-json.c fuzz/replay.c \
	$(fuzz_common) $(fuzz_keys)
fuzz_replay_aws_json_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_json_SOURCES = fuzz/aws-json.c $(fuzz_common) $(fuzz_keys)
fuzz_aws_json_LDADD = $(FUZZ_FS_LIBS)
fuzz_aws_json_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_gcp_impersonation_SOURCES = fuzz/gcp-impersonation.c \
	fuzz/replay.c $(fuzz_common)
fuzz_replay_gcp_impersonation_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_impersonation_SOURCES = fuzz/gcp-impersonation.c $(fuzz_common)
fuzz_gcp_impersonation_LDADD = $(FUZZ_FS_LIBS)
fuzz_gcp_impersonation_LDFLAGS = $(FUZZ_LDFLAGS)
endif
# Azure Blob: the List Blobs XML, the credential providers' documents.
if ENABLE_FS
fuzz_targets += azure-list azure-creds
check_PROGRAMS += fuzz-replay-azure-list fuzz-replay-azure-creds
TESTS += fuzz-replay-azure-list fuzz-replay-azure-creds
fuzz_bins += fuzz/azure-list fuzz/azure-creds
fuzz_replay_azure_list_SOURCES = fuzz/azure-list.c fuzz/replay.c \
	$(fuzz_common) $(fuzz_checks)
fuzz_replay_azure_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_azure_list_SOURCES = fuzz/azure-list.c $(fuzz_common) $(fuzz_checks)
fuzz_azure_list_LDADD = $(FUZZ_FS_LIBS)
fuzz_azure_list_LDFLAGS = $(FUZZ_LDFLAGS)
fuzz_replay_azure_creds_SOURCES = fuzz/azure-creds.c fuzz/replay.c \
	$(fuzz_common)
fuzz_replay_azure_creds_LDADD = $(FUZZ_FS_LIBS)
fuzz_azure_creds_SOURCES = fuzz/azure-creds.c $(fuzz_common)
fuzz_azure_creds_LDADD = $(FUZZ_FS_LIBS)
fuzz_azure_creds_LDFLAGS = $(FUZZ_LDFLAGS)
endif
# Where credentials may go: URLs as libcurl reads them.
if ENABLE_FS
fuzz_targets += credential-url
check_PROGRAMS += fuzz-replay-credential-url
TESTS += fuzz-replay-credential-url
fuzz_bins += fuzz/credential-url
fuzz_replay_credential_url_SOURCES = fuzz/credential-url.c fuzz/replay.c \
	$(fuzz_common)
fuzz_replay_credential_url_LDADD = $(FUZZ_FS_LIBS)
fuzz_credential_url_SOURCES = fuzz/credential-url.c $(fuzz_common)
fuzz_credential_url_LDADD = $(FUZZ_FS_LIBS)
fuzz_credential_url_LDFLAGS = $(FUZZ_LDFLAGS)
endif
if ENABLE_FUZZING
noinst_PROGRAMS = $(fuzz_bins)
endif
EXTRA_DIST += fuzz/README fuzz/corpus fuzz/regress fuzz/dict

FUZZ_SECONDS = 20
# Runs each target for FUZZ_SECONDS on its corpus (new inputs go to
# fuzz/work/NAME in the build tree; a crash to fuzz/crash-NAME-*), then
# prints each one's last status line: executions and coverage.
if ENABLE_FUZZING
fuzz: $(addprefix fuzz/,$(fuzz_targets))
	@failed=; mkdir -p fuzz/work; \
	for t in $(fuzz_targets); do \
	  mkdir -p fuzz/work/$$t; \
	  dict=; test -f $(srcdir)/fuzz/dict/$$t.dict && \
	    dict=-dict=$(srcdir)/fuzz/dict/$$t.dict; \
	  regress=; test -d $(srcdir)/fuzz/regress/$$t && \
	    regress=$(srcdir)/fuzz/regress/$$t; \
	  if ASAN_OPTIONS=detect_leaks=1 ./fuzz/$$t \
	      -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	      -max_len=65536 $$dict -artifact_prefix=fuzz/crash-$$t- \
	      fuzz/work/$$t $(srcdir)/fuzz/corpus/$$t $$regress \
	      >fuzz/$$t.log 2>&1; \
	  then echo "fuzz $$t: ok, $(FUZZ_SECONDS) s:" \
	    "`grep -E '^#[0-9]+' fuzz/$$t.log | tail -1`"; \
	  else tail -40 fuzz/$$t.log; echo "fuzz $$t: FAILED"; \
	    failed="$$failed $$t"; fi; \
	done; \
	if test -n "$$failed"; then \
	  echo "fuzz: found a problem in:$$failed (input: fuzz/crash-*)"; \
	  exit 1; fi
else
fuzz:
	@echo "make fuzz: configure with --enable-fuzzing (needs clang)" >&2; \
	exit 1
endif
.PHONY: fuzz clean-fuzz
clean-local: clean-fuzz
clean-fuzz:
	rm -rf fuzz/work fuzz/crash-* fuzz/*.log
