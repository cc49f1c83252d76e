# The manager's image: a static Go binary on distroless, run as non-root.
#
#   make docker-build IMG=registry.example.com/once-manager:v0.1.0
#
# The bases are pinned by tag. Pin them by digest too where your registry
# policy asks for it (the digests cannot be resolved where this file was
# written): golang:1.26.8-bookworm@sha256:<digest>.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
# VERSION is stamped into the binary (manager --version, and its first log
# line); make docker-build passes git describe.
ARG VERSION=devel

WORKDIR /workspace
# The modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

# The Go sources only (.dockerignore leaves out the rest).
COPY . .

# GOARCH has no default so that the binary matches the platform the image
# is built for (BuildKit sets TARGETARCH). -trimpath keeps the build
# machine's paths out of the binary.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o manager ./cmd

FROM ${BASE_IMAGE}
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
