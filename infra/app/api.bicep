// Flex Consumption plan and the Function App. The runtime lives in functionAppConfig (Flex
// rejects FUNCTIONS_WORKER_RUNTIME as an app setting). Every connection is identity-based:
// the user-assigned identity signs in to storage, Service Bus and Application Insights.
param name string
param planName string
param location string
param tags object
param identityId string
param identityClientId string
param storageAccountName string
@description('Table endpoints of the state store accounts after the main one (StateStoreAccounts).')
param moreStateStoreTableUris string[] = []
param deploymentContainerName string
param applicationInsightsName string
param serviceBusFullyQualifiedNamespace string
param inventoryServiceUrl string
param paymentServiceUrl string
param shippingServiceUrl string
param supervisorSchedule string
param stepTimeoutSeconds string
param claimTimeoutSeconds string
param failureSoftThreshold string
param failureHardThreshold string
param extendedBackoffSeconds string
param serviceOutageAlertThreshold string

@description('Client id of the Entra app registration operators sign in to (infra/hooks/preprovision.sh creates it). Empty: no App Service Authentication, so every operator route answers 401.')
param operatorAuthClientId string = ''

@description('The Key Vault holding the callback signing keys (app/keyvault.bicep).')
param keyVaultName string
param callbackKeysSecretName string

@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 100

// 512 MB: the bench's peak resident memory of the app's process is 160 MB (docs/performance.md),
// under half of it; the rest is for the Functions host process and load beyond the bench's.
@allowed([512, 2048, 4096])
param instanceMemoryMB int = 512

@description('Order-status events: none (no events; clients poll), process (state changes only) or step (also one event per step; one more send per step).')
@allowed(['none', 'process', 'step'])
param statusEvents string = 'process'

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// Names and meaning match local.settings.sample.json (`_inAzure` and `Values`);
// test/infra/drift.test.ts keeps them in step with shared/config/settings.ts.
var appSettings = {
  // Functions host storage (leases, timers, Service Bus scale state): identity only.
  AzureWebJobsStorage__blobServiceUri: storage.properties.primaryEndpoints.blob
  AzureWebJobsStorage__queueServiceUri: storage.properties.primaryEndpoints.queue
  AzureWebJobsStorage__tableServiceUri: storage.properties.primaryEndpoints.table
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId

  // Service Bus triggers and our own ServiceBusClient.
  ServiceBusConnection__fullyQualifiedNamespace: serviceBusFullyQualifiedNamespace
  ServiceBusConnection__credential: 'managedidentity'
  ServiceBusConnection__clientId: identityClientId

  // The state store (Table Storage) for orders, process state and steps.
  StateStoreConnection__tableServiceUri: storage.properties.primaryEndpoints.table
  // Every account orders are spread over, the main one first (one entry: the main one alone).
  StateStoreAccounts: join(concat([storage.properties.primaryEndpoints.table], moreStateStoreTableUris), ',')
  // The order archive (retention): the same account's blob service, container order-archive.
  OrderArchiveConnection__blobServiceUri: storage.properties.primaryEndpoints.blob

  // DefaultAzureCredential in our SDK clients picks the user-assigned identity by this id.
  AZURE_CLIENT_ID: identityClientId

  // The connection string only names the ingestion endpoint: local auth is disabled on the
  // component, so telemetry is accepted only with the Entra token from the line below.
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsights.properties.ConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'

  INVENTORY_SERVICE_URL: inventoryServiceUrl
  PAYMENT_SERVICE_URL: paymentServiceUrl
  SHIPPING_SERVICE_URL: shippingServiceUrl
  SUPERVISOR_SCHEDULE: supervisorSchedule
  STEP_TIMEOUT_SECONDS: stepTimeoutSeconds
  CLAIM_TIMEOUT_SECONDS: claimTimeoutSeconds
  FAILURE_SOFT_THRESHOLD: failureSoftThreshold
  FAILURE_HARD_THRESHOLD: failureHardThreshold
  EXTENDED_BACKOFF_SECONDS: extendedBackoffSeconds
  STATUS_EVENTS: statusEvents
  // Consecutive operational failures at one remote service that raise its outage alert.
  SERVICE_OUTAGE_ALERT_THRESHOLD: serviceOutageAlertThreshold
  // The submission door: refuse new orders (503) once the Scheduler's intake is this far behind,
  // the wait after which a backlog would have given orders up before claims stopped counting.
  ADMISSION_BACKLOG_LIMIT_SECONDS: string(int(failureHardThreshold) * int(claimTimeoutSeconds))
  // Orders a confirmed bulk operator action touches per second at most.
  OPERATOR_BULK_RATE_PER_SECOND: '20'
  // Each customer's orders reach the Scheduler at most this many a second per instance; 0: off.
  CUSTOMER_INTAKE_PER_SECOND: '0'
  // The longest an order may wait for its customer's turn before it is refused (429): the door's.
  CUSTOMER_INTAKE_MAX_WAIT_SECONDS: string(int(failureHardThreshold) * int(claimTimeoutSeconds))
  // Each customer's submissions in progress at once per instance; the rest wait in its line.
  CUSTOMER_SUBMISSIONS_AT_ONCE: '8'
  // Partitions per process state of the operator's state index (docs/state-store.md, capacity).
  ORDER_INDEX_PARTITIONS: '32'
  // Retention (docs/operations.md): terminal orders archived then purged after 90 days, a
  // purged order's Idempotency-Key answers 410 for a year.
  ORDER_RETENTION_DAYS: '90'
  IDEMPOTENCY_RETENTION_DAYS: '365'
  ORDER_PURGE_RATE_PER_SECOND: '20'
  ORDER_ARCHIVE: 'on'

  // Callback tokens (issue 25): the signing keys by Key Vault reference, resolved with the app's
  // identity (keyVaultReferenceIdentity below); rotation is a new secret version (docs/operations.md).
  CALLBACK_SIGNING_KEYS: '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=${callbackKeysSecretName})'

  // The host refuses bodies over 1 MiB before reading them (its default is 100 MB); the API's own
  // limit (64 KiB, problem+json 413) applies below that.
  FUNCTIONS_REQUEST_BODY_SIZE_LIMIT: '1048576'
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  // azd finds the app to deploy the `api` service to by this tag.
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // Key Vault references (CALLBACK_SIGNING_KEYS) are resolved with the user-assigned identity.
    keyVaultReferenceIdentity: identityId
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'node'
        version: '24'
      }
    }
  }

  resource settings 'config' = {
    name: 'appsettings'
    properties: appSettings
  }

  // App Service Authentication ("Easy Auth") with Entra ID, for operators only: it validates an
  // operator's sign-in or bearer token and hands the app the principal (x-ms-client-principal,
  // with the Operator app role), stripping any copy a client sends. Unauthenticated requests go
  // through: clients keep calling their routes with function keys, and the operator routes
  // (authLevel anonymous) check the role themselves (shared/http/operatorAuth.ts).
  resource auth 'config' = if (!empty(operatorAuthClientId)) {
    name: 'authsettingsV2'
    properties: {
      platform: {
        enabled: true
      }
      globalValidation: {
        requireAuthentication: false
        unauthenticatedClientAction: 'AllowAnonymous'
      }
      httpSettings: {
        requireHttps: true
      }
      identityProviders: {
        azureActiveDirectory: {
          enabled: true
          registration: {
            clientId: operatorAuthClientId
            openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
          }
          validation: {
            allowedAudiences: [
              'api://${operatorAuthClientId}'
              operatorAuthClientId
            ]
          }
        }
      }
      login: {
        tokenStore: {
          enabled: false
        }
      }
    }
  }
}

output name string = functionApp.name
output uri string = 'https://${functionApp.properties.defaultHostName}'
output operatorAuthEnabled bool = !empty(operatorAuthClientId)
